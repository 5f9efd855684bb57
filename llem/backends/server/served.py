"""What a server serves: its ``GET /v1/models`` list, and whether the run's model is on it.

Asked twice for a running server (``server.url``): at pre-flight, before anything is loaded, with a
short timeout (``PREFLIGHT_TIMEOUT_S``), so that a server that is not there, or that serves the
model under another name, is refused in seconds with exit 3 and nothing written; and again once
loaded (a launched server, after its launch; a running one, which may have gone since), with a
longer one (``LOAD_TIMEOUT_S``), where a failure is the run's.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from llem.config.server import ServerConfig
from llem.errors import RunError
from llem.vocabulary.engine import BackendSections

#: seconds pre-flight waits on a running server's /v1/models: to connect, then for each read
#: (urllib's socket timeout); a refused connection is refused at once
PREFLIGHT_TIMEOUT_S = 3.0
#: the same once the server is loaded (a launched server answers its first requests slowly)
LOAD_TIMEOUT_S = 10.0


def served_name(sections: BackendSections[ServerConfig]) -> str:
    """The name requests use for the model: ``server.model``, else ``model.name_or_path``."""
    return sections.engine.model or sections.model.name_or_path


def served_models(base_url: str, key: str | None, timeout_s: float = LOAD_TIMEOUT_S) -> list[str]:
    """The model ids ``GET /v1/models`` lists; a server that does not answer is a RunError."""
    url = base_url.rstrip("/") + "/v1/models"
    request = urllib.request.Request(url)  # noqa: S310 (the configured server)
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as r:  # noqa: S310
            answer = json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RunError(f"server at {base_url}: GET /v1/models answered HTTP {e.code}") from e
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", e)  # a URLError's cause, else the error itself
        if isinstance(reason, TimeoutError):  # to connect, or while reading
            reason = f"no answer within {timeout_s:g} s"
        raise RunError(f"cannot connect to the server at {url} ({reason})") from e
    return model_ids(answer)


def model_ids(answer: object) -> list[str]:
    """The model ids a ``GET /v1/models`` answer lists ([] where it lists none)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    return [m["id"] for m in data or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def not_served(name: str, base_url: str, served: list[str]) -> str | None:
    """Why ``name`` cannot be asked of the server that serves ``served`` (None: it can)."""
    if name in served:
        return None
    return (
        f"model {name!r} is not served by {base_url} (served: "
        f"{', '.join(served) or 'none listed'}); set server.model to the served name"
    )

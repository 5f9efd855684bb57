"""Finding a model: ``pkg:`` references, local directories, GGUF files, the HF cache. A GGUF
checkpoint's converted copy, kept between runs, is ``llem.backends.gguf_cache``.

Nothing here imports torch or transformers at module level, so pre-flight stays fast.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from llem.config.model import ModelConfig, Weights

PKG_PREFIX = "pkg:"


def resolve_name_or_path(name_or_path: str) -> tuple[str, bool]:
    """Return ``(what from_pretrained receives, is_local)``.

    ``pkg:<package>`` names a model shipped inside an installed Python package: it resolves to the
    package directory, found without importing the package (its own imports may be unavailable).
    """
    if name_or_path.startswith(PKG_PREFIX):
        package = name_or_path[len(PKG_PREFIX) :]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                f"model.name_or_path={name_or_path}: Python package '{package}' is not installed"
            )
        return str(next(iter(spec.submodule_search_locations))), True
    path = Path(name_or_path).expanduser()
    if path.exists():
        return str(path.resolve()), True
    return name_or_path, False


def _offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def model_problem(m: ModelConfig) -> str | None:
    """None when ``m`` can be loaded here; otherwise one sentence saying why not. A shipped
    architecture with random weights needs nothing (``model.name_or_path`` is not used); random
    weights from ``model.name_or_path`` need its config.json only."""
    if m.weights == Weights.random and m.architecture is not None:
        return None
    return model_access_problem(m.name_or_path, m.gguf_file, m.revision)


def model_access_problem(
    name_or_path: str, gguf_file: str | None, revision: str | None
) -> str | None:
    """None when the model can be loaded here; otherwise one sentence saying why not."""
    try:
        resolved, is_local = resolve_name_or_path(name_or_path)
    except FileNotFoundError as exc:
        return str(exc)
    if is_local:
        return _local_problem(Path(resolved), name_or_path, gguf_file)
    return _hub_problem(name_or_path, gguf_file, revision)


def _local_problem(root: Path, name_or_path: str, gguf_file: str | None) -> str | None:
    if gguf_file:
        found = ", ".join(sorted(p.name for p in root.glob("*.gguf")))
        if not (root / gguf_file).is_file():
            return (
                f"model.gguf_file={gguf_file}: not found in {root} "
                f"(GGUF files there: {found or 'none'})"
            )
        return None
    if root.is_file():
        return (
            f"model.name_or_path={name_or_path} is a file; for a GGUF file set "
            "model.name_or_path=<its directory> model.gguf_file=<file name>"
        )
    if not (root / "config.json").is_file():
        return f"model.name_or_path={name_or_path}: directory has no config.json"
    return None


HUB_TIMEOUT_S = 5.0  # how long pre-flight waits for the hub's answer about a model not cached


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment now, as huggingface_hub reads it
    at import: ``HF_HUB_CACHE`` (or the older ``HUGGINGFACE_HUB_CACHE``), else ``HF_HOME/hub``,
    else ``$XDG_CACHE_HOME/huggingface/hub`` (``~/.cache`` without it)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    home = os.environ.get("HF_HOME") or Path(xdg) / "huggingface"
    return Path(home).expanduser() / "hub"


def _hub_problem(name_or_path: str, gguf_file: str | None, revision: str | None) -> str | None:
    """A hub id: in the local HF cache, it loads. Not in it: offline (``HF_HUB_OFFLINE`` or
    ``TRANSFORMERS_OFFLINE``), a problem at once; online, a problem unless the hub answers within
    ``HUB_TIMEOUT_S`` (one request, no retries) that the model exists, which from_pretrained then
    downloads."""
    looks_like_id = name_or_path.count("/") <= 1 and not name_or_path.startswith((".", "/", "~"))
    if not looks_like_id:
        return f"model.name_or_path={name_or_path}: no such local directory"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(
            name_or_path,
            gguf_file or "config.json",
            cache_dir=hub_cache_dir(),
            revision=revision or None,
        )
    except Exception as exc:  # invalid repo ids raise here
        return f"model.name_or_path={name_or_path}: {exc}"
    if isinstance(cached, str):
        return None
    missing = (
        f"model.name_or_path={name_or_path} is not in the local Hugging Face cache "
        f"({hub_cache_dir()})"
    )
    if _offline():
        return (
            f"{missing} and HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set: is it downloaded? "
            f"(hf download {name_or_path}, where there is network), or point "
            "model.name_or_path at a local directory"
        )
    answer = ask_hub(name_or_path, gguf_file, revision)
    return f"{missing} and {answer}" if answer else None


def ask_hub(name_or_path: str, gguf_file: str | None, revision: str | None) -> str | None:
    """None when the hub says the model (and its GGUF file) is there to download; otherwise why
    it cannot be downloaded now, as the end of a sentence with the hint. Asked once per process
    (the points of a sweep share the answer)."""
    key = (os.environ.get("HF_ENDPOINT") or "", name_or_path, gguf_file, revision)
    if key not in _HUB_ANSWERS:
        _HUB_ANSWERS[key] = _ask_hub(name_or_path, gguf_file, revision)
    return _HUB_ANSWERS[key]


_HUB_ANSWERS: dict[tuple[str, str, str | None, str | None], str | None] = {}


def _ask_hub(name_or_path: str, gguf_file: str | None, revision: str | None) -> str | None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    try:
        info = api.model_info(name_or_path, revision=revision or None, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        return "the hub says it is gated: request access on its page, then log in (hf auth login)"
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        return f"the hub has no such model ({type(exc).__name__}): check the id and revision"
    except HfHubHTTPError as exc:
        return f"the hub refused it ({str(exc).splitlines()[0]})"
    except Exception as exc:  # no network, DNS, a timeout: one try, no retries
        return (
            f"the hub could not be reached ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no answer'}; one try of at most "
            f"{HUB_TIMEOUT_S:g} s): is it downloaded? "
            f"(hf download {name_or_path}, where there is network); set HF_HUB_OFFLINE=1 to use "
            "the cache only"
        )
    files = {s.rfilename for s in info.siblings or []}
    if gguf_file and files and gguf_file not in files:
        return f"the hub's copy has no {gguf_file} (model.gguf_file)"
    return None

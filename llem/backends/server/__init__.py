"""``+backend=server``: any OpenAI-compatible server, launched by llem or already running.

``client`` sends and streams the requests (``drive``'s submit), ``metrics`` scrapes the server's
Prometheus ``/metrics``, ``watch`` runs both on one event loop during the window, ``view`` turns
the scrape into the result's figures, ``launch`` starts and stops a server process group,
``presets`` builds its command from the point's keys, ``backend`` is the engine's driver,
``loaded`` the loaded server and the result's ``server`` section. Nothing here imports aiohttp
or transformers at module level.
"""

from __future__ import annotations

from llem.backends.server.backend import Sections, ServerBackend, ServerModel
from llem.config.server import ServerConfig
from llem.vocabulary.engine import Backend

__all__ = ["ServerBackend", "ServerModel", "create_backend"]


def create_backend(sections: Sections) -> Backend[ServerConfig]:
    return ServerBackend(sections)

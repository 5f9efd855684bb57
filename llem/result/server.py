"""result.json's ``server`` section (schema 6): the OpenAI-compatible server a ``+backend=server``
run measured, and how it was started.

``url`` is where the requests went; ``launched`` whether llem started the server for the point
(``server.launch``) or measured one already running (``server.url``). For a launched server,
``command`` is its full command line (the API key's value never appears in it: the key is read
from the variable ``server.api_key_env`` names, and only the variable's name is configured),
``version`` what the server reports (null with the reason where it reports none),
``launch_to_ready_s`` the seconds from the launch to its first ready answer and ``log`` its log
file; for a running server they are null with the reason. ``endpoint`` is the API the requests
used (completions or chat). ``metrics_source`` is null: the server's Prometheus ``/metrics``
scraper (``llem.backends.server.metrics``) is not wired into runs yet. The section is null for
the in-process engines.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSection:
    url: str
    launched: bool
    endpoint: str  # completions | chat
    model: str  # the name the server serves the model as
    command: str | None = None  # a launched server's full command line
    version: str | None = None
    launch_to_ready_s: float | None = None
    log: str | None = None  # a launched server's log file
    metrics_source: str | None = None  # the /metrics scrape (not wired yet: null)

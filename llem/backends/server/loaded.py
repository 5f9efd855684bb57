"""A loaded server (``ServerModel``: where it is, what it serves, the launched process group) and
the result's ``server`` section it writes (``llem.result.server``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llem.backends.server.launch import LaunchedServer, LaunchRecord
from llem.backends.types import LoadedModel
from llem.result import RunResult, ServerSection

RUNNING = "the server was already running (server.url): llem did not start it"
METRICS = "the server's /metrics scrape (llem.backends.server.metrics) is not wired into runs yet"


@dataclass
class ServerModel(LoadedModel):
    """A server ready to answer: where it is, the name it serves the model as, and the launched
    process group where llem started it."""

    base_url: str = ""
    served_model: str = ""
    endpoint: str = "completions"
    launched: LaunchedServer | None = None
    launch_record: LaunchRecord | None = None
    _previous_sigterm: Any = field(default=None, repr=False)

    def fill_result(self, result: Any) -> None:
        server_section(self, result)


def server_section(loaded: ServerModel, result: RunResult) -> None:
    """``result.server`` from ``loaded``, each null with its reason."""
    record = loaded.launch_record
    result.server = ServerSection(
        url=loaded.base_url,
        launched=record is not None,
        endpoint=loaded.endpoint,
        model=loaded.served_model,
        command=record.command_line if record else None,
        version=record.version if record else None,
        launch_to_ready_s=round(record.launch_to_ready_s, 3) if record else None,
        log=record.log_path if record else None,
    )
    reasons = result.null_reasons
    if record is None:
        for key in ("command", "version", "launch_to_ready_s", "log"):
            reasons[f"server.{key}"] = RUNNING
    elif record.version is None:
        reasons["server.version"] = record.version_reason or "the server reports no version"
    reasons["server.metrics_source"] = METRICS

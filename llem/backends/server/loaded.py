"""A loaded server (``ServerModel``: where it is, what it serves, the launched process group) and
the result's ``server`` section it writes (``llem.result.server``): what it is before the window
(``fill_result``), and the server's own view of the window after it (``fill_window``, with
``server_metrics.csv``)."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llem.backends.server import gpus, load, running, scope, speculation
from llem.backends.server.launch import LaunchedServer, LaunchRecord
from llem.backends.server.processes import process_name
from llem.backends.server.running import RunningServer
from llem.backends.server.view import FIGURES, UsageCounts, server_view
from llem.backends.server.watch import Watched
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.devices.gpus import open_gpus
from llem.result import RunResult, ServerSection
from llem.result.server import write_server_metrics
from llem.vocabulary.model import EngineGpus, LoadedModel, WorkloadProcesses

log = logging.getLogger(__name__)

RUNNING = "the server was already running (server.url): llem did not start it"
DEVICE_NOT_STATED = (
    "not stated: the server at {url} was already running (server.url), so llem cannot know "
    "its device; server.gpus names its GPUs"
)
NO_WINDOW = "the run ended before its measured window did: the server's /metrics was not read"
USAGE = ("usage_prompt_tokens", "usage_completion_tokens")
#: where the server ran, found after the window (``llem.backends.server.gpus``)
WHERE = ("gpus_used", "processes", "processes_found_by")


@dataclass
class ServerModel(LoadedModel):
    """A server ready to answer: where it is, the name it serves the model as, the launched
    process group where llem started it, and what the last measured window saw."""

    base_url: str = ""
    served_model: str = ""
    tokenizer_of: str = ""  # the model whose tokenizer builds the prompts (model.name_or_path)
    stated_gpus: list[int] | None = None  # server.gpus: where the server runs, as named
    # how to measure a launched server's unmeasured GPUs: a preset's tensor parallelism, or
    # server.gpus for server.command's (``llem.backends.server.gpus``)
    cover: str = gpus.LAUNCHED_COVER
    endpoint: str = "completions"
    launched: LaunchedServer | None = None
    launch_record: LaunchRecord | None = None
    running: RunningServer | None = None  # a server llem did not start: its host, its roots
    watched: Watched | None = None  # the last measured window's serving and /metrics
    speculative: SpeculativeConfig = field(default_factory=SpeculativeConfig)
    sampled: bool = False  # the run samples (the speculative section's verification rule)
    used: EngineGpus | None = None  # the GPUs its processes held in the last window
    _previous_sigterm: Any = field(default=None, repr=False)

    def fill_result(self, result: Any) -> None:
        server_section(self, result)

    def gpus_used(self) -> EngineGpus | None:
        return self.used

    def workload_processes(self) -> WorkloadProcesses | None:
        """A running server's processes (a launched one's are llem's descendants)."""
        return None if self.running is None else self.running.processes.workload(self.base_url)

    def fill_window(self, result: Any, run_dir: Path) -> None:
        self.used = None  # a kept server's last window is not this one
        if result.server is None:
            return
        if self.watched is not None:
            window_view(self.watched, result, run_dir)
            load.record(result, len(self.watched.out.requests))
            if self.speculative.method != SpeculativeMethod.none:
                n = len(self.watched.out.requests)
                speculation.record(result, self.watched.metrics, self.speculative, self.sampled, n)
        if self.running is not None:
            self.used = running.record(result, self.running)
        elif self.launched is not None and self.launched.pid is not None:
            pid = self.launched.pid
            found = f"pid {pid} ({process_name(pid) or 'name unreadable'}), launched by llem"
            result.server = dataclasses.replace(result.server, processes_found_by=found)
            result.null_reasons.pop("server.processes_found_by", None)
            held = gpus.server_gpus(open_gpus, gpus.launched_tree(pid))
            self.used = gpus.record(result, held, self.cover)
        scope.record(result)


def server_section(loaded: ServerModel, result: RunResult) -> None:
    """``result.server`` from ``loaded``, each null with its reason."""
    record = loaded.launch_record
    result.server = ServerSection(
        url=loaded.base_url,
        launched=record is not None,
        endpoint=loaded.endpoint,
        model=loaded.served_model,
        tokenizer=loaded.tokenizer_of or None,
        command=record.command_line if record else None,
        version=record.version if record else None,
        launch_to_ready_s=round(record.launch_to_ready_s, 3) if record else None,
        log=record.log_path if record else None,
        on_this_host=True if loaded.running is None else loaded.running.host.local,
    )
    reasons = result.null_reasons
    if loaded.running is not None or loaded.stated_gpus:
        stated_device(loaded, result)
    if record is None:
        for key in ("command", "version", "launch_to_ready_s", "log"):
            reasons[f"server.{key}"] = RUNNING
    elif record.version is None:
        reasons["server.version"] = record.version_reason or "the server reports no version"
    for key in (*FIGURES, "metrics_url", "metrics_poll_ms", *USAGE, *WHERE):
        reasons[f"server.{key}"] = NO_WINDOW


def stated_device(loaded: ServerModel, result: RunResult) -> None:
    """``result.device`` for a server llem did not start, or started by server.command on the
    GPUs server.gpus names: not llem's own device but what is known of the server's, ``cuda``
    where server.gpus names its GPUs (measured whatever llem's torch sees), else null with the
    reason."""
    if loaded.stated_gpus:
        result.device = "cuda"
        result.null_reasons.pop("device", None)
        return
    result.device = None
    result.null_reasons["device"] = DEVICE_NOT_STATED.format(url=loaded.base_url)


def window_view(watched: Watched, result: RunResult, run_dir: Path) -> None:
    """The server's view of the window into ``result.server`` and ``server_metrics.csv``."""
    assert result.server is not None
    view = server_view(watched.metrics, watched.metrics_url, watched.out.start_s, usage(watched))
    if view.rows:
        write_server_metrics(run_dir, view.rows)
    result.server = dataclasses.replace(result.server, **view.fields)
    reasons = result.null_reasons
    for key, value in view.fields.items():
        if value is not None:
            reasons.pop(f"server.{key}", None)
    reasons.update({f"server.{k}": why for k, why in view.reasons.items()})
    failed = view.fields["metrics_failed_polls"]
    if failed:
        log.warning(
            "%d poll(s) of the server's /metrics gave no sample: %s", failed, watched.metrics.reason
        )
    served, counted = view.fields["generation_tokens"], view.fields["usage_completion_tokens"]
    if served is not None and counted is not None and served != counted:
        log.warning(
            "the server counted %g generated tokens over the window, its usage answers %d "
            "(both kept in result.json's server section)",
            served,
            counted,
        )


def usage(watched: Watched) -> UsageCounts:
    """The window's prompt and completion tokens from the usage of its requests."""
    prompt = [getattr(t, "prompt_tokens", None) for t in watched.out.requests]
    completion = [getattr(t, "completion_tokens", None) for t in watched.out.requests]
    return UsageCounts(
        None if None in prompt else sum(p or 0 for p in prompt),
        None if None in completion else sum(c or 0 for c in completion),
    )

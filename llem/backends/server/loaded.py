"""A loaded server (``ServerModel``: where it is, what it serves, the launched process group) and
what it says of itself for the result's ``server`` section (``llem.result.server``): what it is
before the window (``engine_facts``), and the server's own view of the window after it
(``window_facts``, with ``server_metrics.csv``), handed to the run as facts
(``llem.vocabulary.facts``), which the run writes and judges."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llem.backends.server import gpus, running, speculation
from llem.backends.server.launch import LaunchedServer, LaunchRecord
from llem.backends.server.processes import process_name
from llem.backends.server.running import RunningServer
from llem.backends.server.view import FIGURES, UsageCounts, View, server_view
from llem.backends.server.watch import Watched
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.result import ServerSection
from llem.result.server import write_server_metrics
from llem.vocabulary.facts import (
    DeviceStatement,
    EngineFacts,
    EngineLoad,
    EngineProcesses,
    LentGpus,
    SectionFacts,
    WindowFacts,
)
from llem.vocabulary.model import LoadedModel, WorkloadProcesses

log = logging.getLogger(__name__)

ALREADY_RUNNING = "the server was already running (server.url): llem did not start it"
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
    _previous_sigterm: Any = field(default=None, repr=False)

    def engine_facts(self) -> EngineFacts:
        return EngineFacts(opening(self), stated_device(self))

    def workload_processes(self) -> WorkloadProcesses | None:
        """A running server's processes (a launched one's are llem's descendants)."""
        return None if self.running is None else self.running.processes.workload(self.base_url)

    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        """The server's /metrics and usage over the window, the load it counted, its
        speculation, and where its processes ran (looked up through the run's ``gpus``)."""
        view = load = spec = None
        if self.watched is not None:
            seen = window_view(self.watched, run_dir)
            reasons = {f"server.{k}": why for k, why in seen.reasons.items()}
            view = SectionFacts(seen.fields, reasons)
            n = len(self.watched.out.requests)
            load = EngineLoad(
                n,
                seen.fields["requests_finished"],
                seen.fields["generation_tokens"],
                seen.fields["usage_completion_tokens"],
            )
            if self.speculative.method != SpeculativeMethod.none:
                metrics = self.watched.metrics
                spec = speculation.window_facts(metrics, self.speculative, self.sampled, n)
        return WindowFacts(view, load, spec, self._processes(gpus, measured))

    def _processes(self, lent: LentGpus, measured: Sequence[str]) -> EngineProcesses | None:
        """Where the server's processes ran: a running server's by its roots, a launched one's
        by its tree."""
        if self.running is not None:
            return running.window_processes(self.running, lent, measured)
        if self.launched is None or self.launched.pid is None:
            return None
        pid = self.launched.pid
        found = f"pid {pid} ({process_name(pid) or 'name unreadable'}), launched by llem"
        held = gpus.server_gpus(lent, gpus.launched_tree(pid))
        return EngineProcesses(found, held, self.cover, gpus.WHO, launched=True)


def opening(loaded: ServerModel) -> SectionFacts:
    """``result.server`` as it opens, from ``loaded``, each null with its reason."""
    record = loaded.launch_record
    section = ServerSection(
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
    reasons: dict[str, str] = {}
    if record is None:
        for key in ("command", "version", "launch_to_ready_s", "log"):
            reasons[f"server.{key}"] = ALREADY_RUNNING
    elif record.version is None:
        reasons["server.version"] = record.version_reason or "the server reports no version"
    for key in (*FIGURES, "metrics_url", "metrics_poll_ms", *USAGE, *WHERE):
        reasons[f"server.{key}"] = NO_WINDOW
    return SectionFacts(dataclasses.asdict(section), reasons)


def stated_device(loaded: ServerModel) -> DeviceStatement | None:
    """The device of a server llem did not start, or started by server.command on the GPUs
    server.gpus names: not llem's own device but what is known of the server's, its GPUs where
    server.gpus names them (measured whatever llem's torch sees; the run names their type from
    the vendor), else not stated, with the reason; None for a preset llem launched (llem's
    device stands)."""
    if loaded.stated_gpus:
        return DeviceStatement(on_gpus=True)
    if loaded.running is None:
        return None
    return DeviceStatement(False, DEVICE_NOT_STATED.format(url=loaded.base_url))


def window_view(watched: Watched, run_dir: Path) -> View:
    """The server's view of the window (its figures and their null reasons), its rows written
    to ``server_metrics.csv``."""
    view = server_view(watched.metrics, watched.metrics_url, watched.out.start_s, usage(watched))
    if view.rows:
        write_server_metrics(run_dir, view.rows)
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
    return view


def usage(watched: Watched) -> UsageCounts:
    """The window's prompt and completion tokens from the usage of its requests."""
    prompt = [getattr(t, "prompt_tokens", None) for t in watched.out.requests]
    completion = [getattr(t, "completion_tokens", None) for t in watched.out.requests]
    return UsageCounts(
        None if None in prompt else sum(p or 0 for p in prompt),
        None if None in completion else sum(c or 0 for c in completion),
    )

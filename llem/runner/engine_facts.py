"""The engine's facts written into the result, and judged: the run's side of the engine seam
(``llem.vocabulary.facts``).

Once the model is loaded, ``write_engine_facts``: the engine's own section (a server's
``server``) and the device it states, its type named from the vendor's library where the run
has one (``llem.devices.gpus.gpu_device_type``). After the window, ``write_window_facts``: the
section's figures the engine saw, its speculation (``speculative``, with its ratios and J per
accepted token), the load it counted (check ``server_load``, ``llem.measure.engine_load``),
where its processes ran (``llem.runner.engine_processes``) and what the energy then takes in
(``llem.runner.engine_scope``). The GPUs the processes held are returned, for the check that the
run measured each of them (``llem.measure.engine_gpus``).
"""

from __future__ import annotations

import dataclasses

from llem.devices.gpu import GpuOpener
from llem.devices.gpus import gpu_device_type
from llem.measure.engine_load import judge_engine_load
from llem.result import RunResult, ServerSection, SpeculativeSection
from llem.result.speculative import fill_ratios
from llem.runner.engine_processes import write_processes
from llem.runner.engine_scope import state_scope
from llem.vocabulary.facts import DeviceStatement, EngineFacts, SectionFacts, WindowFacts
from llem.vocabulary.model import EngineGpus


def write_engine_facts(result: RunResult, facts: EngineFacts, gpus: GpuOpener) -> None:
    """What the loaded engine says of itself into ``result`` (nothing for an engine in this
    process); ``gpus`` is the run's library, which names a stated GPU device's type."""
    if facts.server is not None:
        fields = facts.server.fields
        result.server = None if fields is None else ServerSection(**fields)
    if facts.device is not None:
        _state_device(result, facts.device, gpus)
    if facts.server is not None:
        result.null_reasons.update(facts.server.null_reasons)


def write_window_facts(result: RunResult, facts: WindowFacts) -> EngineGpus | None:
    """What the engine saw of the window into ``result``, judged; returns the GPUs its processes
    held (None: it runs in llem's processes, on the GPUs the run measures)."""
    used = None
    if facts.server is not None:
        _server_view(result, facts.server)
    if facts.load is not None:
        judge_engine_load(result, facts.load)
    if facts.speculative is not None:
        _speculative(result, facts.speculative)
    if facts.processes is not None:
        used = write_processes(result, facts.processes)
    if result.server is not None:
        state_scope(result)
    return used


def _state_device(result: RunResult, statement: DeviceStatement, gpus: GpuOpener) -> None:
    """``result.device`` for an engine outside llem's processes: the vendor's device type where
    it runs on GPUs, else null with the reason."""
    if not statement.on_gpus:
        result.device = None
        result.null_reasons["device"] = statement.null_reason or "not stated"
        return
    result.device = gpu_device_type(gpus)
    result.null_reasons.pop("device", None)


def _server_view(result: RunResult, view: SectionFacts) -> None:
    """The server's view of the window into ``result.server``: its figures, their null reasons
    replaced."""
    assert result.server is not None
    fields = view.fields or {}
    result.server = dataclasses.replace(result.server, **fields)
    reasons = result.null_reasons
    for key, value in fields.items():
        if value is not None:
            reasons.pop(f"server.{key}", None)
    reasons.update(view.null_reasons)


def _speculative(result: RunResult, facts: SectionFacts) -> None:
    """The ``speculative`` section as counted, with its ratios and J per accepted token; or its
    null reason."""
    if facts.fields is not None:
        result.speculative = SpeculativeSection(**facts.fields)
    result.null_reasons.update(facts.null_reasons)
    if facts.fields is not None:
        fill_ratios(result)

"""Where an engine's processes ran in the window (a server's: ``EngineProcesses``, found by the
engine after it), written into ``result.server`` and judged.

A launched server's processes are llem's own descendants: the GPUs they held are recorded
(``server.gpus_used``, ``server.processes``). A server llem did not start is found by its roots
(``server.pids``, or the process listening on its port): where one is known, check
``server_processes`` passes; where none is, every process on the measured GPUs but llem's is
taken as the server's, and the check states it as a condition (another program's work there
would be in the figures). Where no GPU of this host was measured, nothing was looked at, and the
check is not checked. The GPUs the processes held go on to the check that the run measured each
of them (``llem.measure.engine_gpus``).
"""

from __future__ import annotations

import dataclasses

from llem.result import RunResult
from llem.vocabulary.facts import EngineProcesses, HeldGpus
from llem.vocabulary.model import EngineGpus

CHECK = "server_processes"


def write_processes(result: RunResult, facts: EngineProcesses) -> EngineGpus:
    """``facts`` into ``result.server`` (and, for a server llem did not start, the check
    ``server_processes`` into ``result.validity``); returns the GPUs they held, for the run to
    judge against those it measured. An engine with no section of its own gives the GPUs
    alone."""
    if result.server is None:
        held = facts.held or HeldGpus(None, "no GPU of this host was measured")
        return EngineGpus(held.uuids, held.null_reason, facts.cover, facts.who)
    reasons = result.null_reasons
    if facts.launched:
        result.server = dataclasses.replace(result.server, processes_found_by=facts.found_by)
        reasons.pop("server.processes_found_by", None)
        assert facts.held is not None  # a launched server's tree is always looked up
        return _record_held(result, facts.held, facts)
    result.server = dataclasses.replace(
        result.server, on_this_host=facts.on_this_host, processes_found_by=facts.found_by
    )
    checks = result.validity.checks
    reasons.pop("server.on_this_host", None)
    if facts.found_by is not None:
        reasons.pop("server.processes_found_by", None)
    else:
        reasons["server.processes_found_by"] = (
            f"no process is known as the server's: {facts.not_found}"
        )
    if facts.held is None:
        why = "no GPU of this host was measured: " + (
            "the energy is a replayed trace"
            if result.energy.source == "replay"
            else result.energy.unavailable_reason or "energy unavailable"
        )
        for key in ("server.gpus_used", "server.processes"):
            reasons[key] = why
        checks[CHECK] = "not checked"
        return EngineGpus(None, why, facts.cover, facts.who)
    if facts.attributed:
        used = _record_held(result, facts.held, facts)
        checks[CHECK] = "passed"
        return used
    _record_unattributed(result, facts.held, facts)
    return EngineGpus(None, reasons["server.gpus_used"], facts.cover, facts.who)


def measured_here(result: RunResult) -> list[str]:
    """The UUIDs of this host's GPUs the window measured (none for a replayed trace): where an
    engine's processes are looked for."""
    if result.energy.source == "replay":
        return []
    return [g.uuid for g in result.hardware.gpus]


def _record_held(result: RunResult, held: HeldGpus, facts: EngineProcesses) -> EngineGpus:
    """``held`` into ``result.server`` (``gpus_used``, ``processes``, each null with its
    reason)."""
    assert result.server is not None
    result.server = dataclasses.replace(
        result.server, gpus_used=held.uuids, processes=held.processes
    )
    if held.uuids is None:
        result.null_reasons["server.gpus_used"] = held.null_reason or "not known"
        result.null_reasons["server.processes"] = held.null_reason or "not known"
    else:
        for key in ("server.gpus_used", "server.processes"):
            result.null_reasons.pop(key, None)
    return EngineGpus(held.uuids, held.null_reason, facts.cover, facts.who)


def _record_unattributed(result: RunResult, seen: HeldGpus, facts: EngineProcesses) -> None:
    """No root known: every process on the measured GPUs (but llem's) is taken as the server's,
    stated as a condition."""
    assert result.server is not None
    result.server = dataclasses.replace(result.server, processes=seen.processes)
    reasons, validity = result.null_reasons, result.validity
    reasons["server.gpus_used"] = f"the server's processes are not known ({facts.not_found})"
    if seen.processes is None:
        reasons["server.processes"] = seen.null_reason or "not known"
        validity.checks[CHECK] = "not checked"
        return
    reasons.pop("server.processes", None)
    named = ", ".join(f"pid {p.pid} on {p.device}" for p in seen.processes)
    validity.conditions.append(
        f"The server's own processes are not known ({facts.not_found}): every process on the "
        f"measured GPUs ({named}) is taken as the server's; another program's work there would "
        "be in the figures. Name the server's processes with server.pids to check."
        if seen.processes
        else f"No compute process was on the measured GPUs at the window's end, and the "
        f"server's own processes are not known ({facts.not_found}): the server may not run on "
        "the GPUs named (server.gpus)."
    )
    validity.checks[CHECK] = "condition"

"""Which GPUs a server runs on, from its process trees, and whether llem measured them.

The server's processes (a launched server's leader, which llem started, or a running server's
roots, ``llem.backends.server.processes``, and every descendant: vLLM's engine core and workers)
are found on the GPUs through the vendor library's list of compute processes, and recorded
(``server.processes``: pid, name, GPU, memory). A GPU
the server runs on that llem did not measure makes the run's energy invalid (the server's work
there is missing from every figure); a measured GPU the server does not run on is a condition (its
idle power is in the figures). Where the library cannot list processes, or there is no GPU library,
the GPUs are null with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from llem.backends.server.processes import process_name
from llem.devices.gpu import GpuOpener, GpuUnavailable
from llem.measure.family import is_own
from llem.result import Figure, RunResult

CHECK = "server_gpus"


@dataclass(frozen=True)
class ServerGpus:
    """UUIDs the server's processes hold, or None with ``null_reason``; ``processes`` are those
    processes ({pid, name, device, used_memory_mb}; None with the same reason)."""

    uuids: list[str] | None
    null_reason: str | None = None
    processes: list[dict[str, Any]] | None = None


def launched_tree(server_pid: int) -> Callable[[int], bool]:
    """A launched server's processes: its leader and the leader's descendants."""
    return lambda pid: is_own(pid, server_pid)


def server_gpus(
    opener: GpuOpener,
    owns: Callable[[int], bool],
    only: Collection[str] | None = None,
    name: Callable[[int], str | None] = process_name,
) -> ServerGpus:
    """The GPUs (of ``only``, where given) on which a process ``owns`` calls the server's is a
    compute process, and those processes."""
    try:
        lib = opener()
    except GpuUnavailable as exc:
        return ServerGpus(None, f"no GPU library: {exc}")
    try:
        found: list[str] = []
        unlisted: list[str] = []
        processes: list[dict[str, Any]] = []
        for gpu in lib.gpus():
            if only is not None and gpu.uuid not in only:
                continue
            # the reader lists the processes its predicate calls not own: here, the server's
            procs = lib.reader(gpu).other_processes(lambda pid: not owns(pid))
            if procs is None:
                unlisted.append(gpu.uuid)
            elif procs:
                found.append(gpu.uuid)
                processes += [{**p.to_dict(), "name": name(p.pid)} for p in procs]
    finally:
        lib.shutdown()
    if unlisted and not found:
        why = f"{lib.api} cannot list the compute processes of " + ", ".join(unlisted)
        return ServerGpus(None, why)
    return ServerGpus(found, processes=processes)


#: how to measure the GPUs a launched server used beyond those measured
LAUNCHED_COVER = "set measurement.gpu_indices or the server's tensor_parallel_size to cover them"
#: the same for a running server (server.url), or one server.command starts (no preset's
#: tensor parallelism: its GPUs are the ones server.gpus names)
RUNNING_COVER = "set server.gpus to cover them"


def record(result: RunResult, found: ServerGpus, cover: str = LAUNCHED_COVER) -> None:
    """``found`` into ``result.server.gpus_used``, and its judgement against the GPUs the run
    measured into ``result.validity`` (check ``server_gpus``)."""
    assert result.server is not None
    result.server = dataclasses.replace(
        result.server, gpus_used=found.uuids, processes=found.processes
    )
    validity = result.validity
    if found.uuids is None:
        result.null_reasons["server.gpus_used"] = found.null_reason or "not known"
        result.null_reasons["server.processes"] = found.null_reason or "not known"
        validity.checks[CHECK] = "not checked"
        return
    for key in ("server.gpus_used", "server.processes"):
        result.null_reasons.pop(key, None)
    measured = [g.get("uuid") for g in result.hardware.gpus if isinstance(g, dict)]
    problems, conditions = judge(found.uuids, [u for u in measured if isinstance(u, str)], cover)
    validity.problems.extend(problems)
    validity.conditions.extend(conditions)
    validity.checks[CHECK] = "failed" if problems else ("condition" if conditions else "passed")
    if problems and validity.energy_valid is not None:
        result.set_figure("validity.energy_valid", Figure(False))


def judge(
    used: Sequence[str], measured: Sequence[str], cover: str = LAUNCHED_COVER
) -> tuple[list[str], list[str]]:
    """(problems, conditions): a GPU the server used that was not measured is a problem; a
    measured GPU it did not use is a condition."""
    missing = [u for u in used if u not in measured]
    idle = [u for u in measured if u not in used]
    problems = (
        [
            f"the server runs on GPU(s) {', '.join(missing)}, which llem did not measure: its work "
            f"there is missing from the energy ({cover})"
        ]
        if missing
        else []
    )
    conditions = (
        [
            f"GPU(s) {', '.join(idle)} were measured but the server has no process on them: their "
            "idle power is in the figures"
        ]
        if idle
        else []
    )
    return problems, conditions

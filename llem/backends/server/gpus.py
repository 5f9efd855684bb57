"""Which GPUs a server runs on, from its process trees, and whether llem measured them.

The server's processes (a launched server's leader, which llem started, or a running server's
roots, ``llem.backends.server.processes``, and every descendant: vLLM's engine core and workers)
are found on the GPUs through the vendor library's list of compute processes, and recorded
(``server.processes``: pid, name, GPU, memory). The run judges them against the GPUs it measured
(``llem.measure.engine_gpus``, check ``server_gpus``). Where the library cannot list processes,
or there is no GPU library, the GPUs are null with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from llem.backends.server.processes import process_name
from llem.devices.gpu import GpuOpener, GpuUnavailable
from llem.measure.family import is_own
from llem.result import RunResult
from llem.vocabulary.model import EngineGpus


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


WHO = "the server"  # how the check of the GPUs the engine used names it


def record(result: RunResult, found: ServerGpus, cover: str = LAUNCHED_COVER) -> EngineGpus:
    """``found`` into ``result.server`` (``gpus_used``, ``processes``, each null with its
    reason); returns the GPUs for the run to judge against those it measured
    (``llem.measure.engine_gpus``)."""
    assert result.server is not None
    result.server = dataclasses.replace(
        result.server, gpus_used=found.uuids, processes=found.processes
    )
    if found.uuids is None:
        result.null_reasons["server.gpus_used"] = found.null_reason or "not known"
        result.null_reasons["server.processes"] = found.null_reason or "not known"
    else:
        for key in ("server.gpus_used", "server.processes"):
            result.null_reasons.pop(key, None)
    return EngineGpus(found.uuids, found.null_reason, cover, WHO)

"""Which GPUs a server runs on, from its process trees, and whether llem measured them.

The server's processes (a launched server's leader, which llem started, or a running server's
roots, ``llem.backends.server.processes``, and every descendant: vLLM's engine core and workers)
are found on the GPUs through the vendor library's list of compute processes, and recorded
(``server.processes``: pid, name, GPU, memory) through the run's GPU library, lent to the engine
(``RunGpus``). The run writes them and judges them against the GPUs it measured
(``llem.runner.engine_processes``; ``llem.measure.engine_gpus``, check ``server_gpus``). Where the
library cannot list processes, or there is no GPU library, the GPUs are null with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from llem.backends.server.processes import process_name
from llem.devices.gpu import GpuOpener, GpuUnavailable
from llem.measure.family import is_own
from llem.vocabulary.facts import HeldGpus
from llem.vocabulary.processes import EngineProcess


def launched_tree(server_pid: int) -> Callable[[int], bool]:
    """A launched server's processes: its leader and the leader's descendants."""
    return lambda pid: is_own(pid, server_pid)


def server_gpus(
    opener: GpuOpener,
    owns: Callable[[int], bool],
    only: Collection[str] | None = None,
    name: Callable[[int], str | None] = process_name,
) -> HeldGpus:
    """The GPUs (of ``only``, where given) on which a process ``owns`` calls the server's is a
    compute process, and those processes; ``opener`` is the run's library (its ``shutdown``
    leaves it open for the run)."""
    try:
        lib = opener()
    except GpuUnavailable as exc:
        return HeldGpus(None, f"no GPU library: {exc}")
    try:
        found: list[str] = []
        unlisted: list[str] = []
        processes: list[EngineProcess] = []
        for gpu in lib.gpus():
            if only is not None and gpu.uuid not in only:
                continue
            # the reader lists the processes its predicate calls not own: here, the server's
            procs = lib.reader(gpu).other_processes(lambda pid: not owns(pid))
            if procs is None:
                unlisted.append(gpu.uuid)
            elif procs:
                found.append(gpu.uuid)
                processes += [
                    EngineProcess(p.device, p.pid, p.used_memory_mb, name(p.pid)) for p in procs
                ]
    finally:
        lib.shutdown()
    if unlisted and not found:
        why = f"{lib.api} cannot list the compute processes of " + ", ".join(unlisted)
        return HeldGpus(None, why)
    return HeldGpus(found, processes=processes)


#: how to measure the GPUs a launched server used beyond those measured
LAUNCHED_COVER = "set measurement.gpu_indices or the server's tensor_parallel_size to cover them"
#: the same for a running server (server.url), or one server.command starts (no preset's
#: tensor parallelism: its GPUs are the ones server.gpus names)
RUNNING_COVER = "set server.gpus to cover them"


WHO = "the server"  # how the check of the GPUs the engine used names it

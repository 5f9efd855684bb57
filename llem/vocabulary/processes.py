"""A compute process on a GPU, as result.json records it: another process on a measured GPU
(``energy.other_processes``) and an engine's own (``server.processes``). Memory in MB (2**20
bytes), None where the GPU library hides it.

Imports nothing of llem's; writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OtherProcess:
    """A compute process other than this one on a measured GPU (memory in MB, None if hidden)."""

    device: str  # the GPU's UUID
    pid: int
    used_memory_mb: float | None


@dataclass(frozen=True)
class EngineProcess:
    """A compute process of an engine outside llem's processes on a GPU, with its name
    (``/proc/<pid>/comm``; None where it could not be read)."""

    device: str  # the GPU's UUID
    pid: int
    used_memory_mb: float | None
    name: str | None

"""Which processes are llem's own: this process and its descendants, found through ``/proc``.

A vLLM engine runs its engine core and GPU workers as child processes (and they may start their
own), so NVML lists them as compute processes on the measured GPU beside llem's pid. They are part
of the run and their energy belongs to it; any other process on the GPU is not. ``is_own(pid)``
follows the parent chain in ``/proc/<pid>/stat`` (Linux) up to this process. A pid whose chain
cannot be read (no ``/proc``, the process already exited, another PID namespace) is not llem's:
the check errs towards reporting it.
"""

from __future__ import annotations

import os
from pathlib import Path


def parent_pid(pid: int, proc_root: Path = Path("/proc")) -> int | None:
    """The parent of ``pid`` from ``/proc/<pid>/stat``; None when it cannot be read."""
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'
    fields = stat[stat.rfind(")") + 1 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def is_own(pid: int, root: int | None = None, proc_root: Path = Path("/proc")) -> bool:
    """True when ``pid`` is ``root`` (this process by default) or one of its descendants."""
    root = os.getpid() if root is None else root
    seen: set[int] = set()
    current: int | None = pid
    while current is not None and current > 1 and current not in seen:
        if current == root:
            return True
        seen.add(current)
        current = parent_pid(current, proc_root)
    return current == root

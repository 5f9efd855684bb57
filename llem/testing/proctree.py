"""The processes a process started, and the CPU time each has used, read from Linux's /proc.

For the tests and the benches that check what runs beside a measured window (the report worker a
sweep starts, anything else llem starts). Linux only; elsewhere every answer is empty.

    cpu_s = descendants_cpu_s(os.getpid())   # {pid: user + system CPU seconds}
    times = thread_times(os.getpid())         # {thread id: ThreadTimes(cpu_s, waited_s, name)}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

_PROC = Path("/proc")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def gone(pid: int) -> bool:
    """The process ``pid`` no longer exists (a zombie not yet reaped still does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), None when gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _parents() -> dict[int, int]:
    """{pid: parent pid} of every process now."""
    out: dict[int, int] = {}
    for entry in _PROC.iterdir() if _PROC.is_dir() else ():
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                out[int(entry.name)] = int(fields[1])
    return out


def descendants(pid: int) -> list[int]:
    """Every process ``pid`` started, and theirs, now alive (zombies included)."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return sorted(found)


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds ``pid`` has used (all its threads; resolution one clock tick,
    usually 10 ms); None when it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def descendants_cpu_s(pid: int) -> dict[int, float]:
    """{pid: CPU seconds} of every process ``pid`` started (``descendants``) still readable."""
    out = {}
    for p in descendants(pid):
        used = cpu_s(p)
        if used is not None:
            out[p] = used
    return out


class ThreadTimes(NamedTuple):
    """One thread's times so far: ``cpu_s`` user + system CPU seconds (one clock tick, usually
    10 ms), ``waited_s`` seconds it was ready to run and waited for a CPU (the kernel's
    schedstat; None where the kernel keeps none), and its name."""

    cpu_s: float
    waited_s: float | None
    name: str


def thread_times(pid: int) -> dict[int, ThreadTimes]:
    """{thread id: ThreadTimes} of every thread of ``pid`` now; empty when it is gone.

    A CPU-second figure holds on a busy machine, where wall-clock ones do not: a thread that
    does no work uses none, however long it waits; ``waited_s`` is that wait."""
    out: dict[int, ThreadTimes] = {}
    task = _PROC / str(pid) / "task"
    try:
        tids = [int(t) for t in os.listdir(task)]
    except OSError:
        return out
    for tid in tids:
        try:
            text = (task / str(tid) / "stat").read_text()
        except OSError:
            continue  # ended since the listing
        fields = text[text.rindex(")") + 2 :].split()
        name = text[text.index("(") + 1 : text.rindex(")")]
        try:
            waited: float | None = int((task / str(tid) / "schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            waited = None
        out[tid] = ThreadTimes((int(fields[11]) + int(fields[12])) / _TICKS_PER_S, waited, name)
    return out

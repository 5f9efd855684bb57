"""The crash record of a GPU change, and restoring from it.

Before llem changes a GPU's power limit or clocks it writes what it will have to put back to
``<cache dir>/gpu_restore/<host>-<pid>.json`` (``LLEM_CACHE_DIR``, default ``~/.cache/llem``;
written atomically) and removes the file once it has put everything back. A file left behind means
the process died without restoring (SIGKILL, out of memory, a power cut): the next llem start on
that host (``restore_leftovers``), or ``python -m llem.gpu restore``, restores from it. A record
whose process is still alive is left alone (that run restores its own GPUs), and so is a record
written on another host (a cache directory shared over NFS).

A restore puts back the previous power limit (never "the maximum": another user's setting
survives) and unlocks only the clocks llem locked itself.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llem.atomic import atomic_write_json
from llem.cache import llem_cache_dir
from llem.devices.gpu import Gpu, GpuLibrary, GpuUnavailable
from llem.devices.gpu_control import GpuControl, GpuControlError
from llem.devices.gpus import open_gpus

log = logging.getLogger("llem.gpu")

RECORD_DIR = "gpu_restore"


@dataclass(frozen=True)
class Restore:
    """What to put back on one GPU: its power limit before the change (None: llem did not change
    it) and the clock locks llem set."""

    uuid: str
    index: int  # in the vendor library's numbering (older records call it nvml_index)
    power_limit_w: float | None = None
    sm_clocks_locked: bool = False
    memory_clocks_locked: bool = False

    def describe(self) -> str:
        parts = []
        if self.power_limit_w is not None:
            parts.append(f"power limit {self.power_limit_w:g} W")
        if self.sm_clocks_locked:
            parts.append("SM clock unlocked")
        if self.memory_clocks_locked:
            parts.append("memory clock unlocked")
        return f"GPU {self.index} ({self.uuid}): " + ", ".join(parts or ["nothing"])


@dataclass
class Record:
    host: str
    pid: int
    written_at: float
    gpus: list[Restore] = field(default_factory=list)
    path: Path | None = None  # where it was read from

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "pid": self.pid,
            "written_at": self.written_at,
            "gpus": [asdict(g) for g in self.gpus],
        }


def record_dir() -> Path:
    return llem_cache_dir() / RECORD_DIR


def own_record_path() -> Path:
    return record_dir() / f"{socket.gethostname()}-{os.getpid()}.json"


def write_record(gpus: list[Restore]) -> Path:
    """This process's record (replacing an earlier one of it), written atomically."""
    rec = Record(socket.gethostname(), os.getpid(), time.time(), list(gpus))
    return atomic_write_json(own_record_path(), rec.to_json())


def read_records() -> list[Record]:
    """Every record in the cache directory (unreadable files are logged and skipped)."""
    found = []
    folder = record_dir()
    if not folder.is_dir():
        return []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            gpus = [_restore(g) for g in data["gpus"]]
            found.append(Record(data["host"], int(data["pid"]), data["written_at"], gpus, path))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("GPU restore record %s is not readable (%s); left as it is", path, exc)
    return found


def _restore(entry: dict[str, Any]) -> Restore:
    """One GPU of a record; a record written before the device layer named the index
    ``nvml_index``."""
    entry = dict(entry)
    if "nvml_index" in entry and "index" not in entry:
        entry["index"] = entry.pop("nvml_index")
    return Restore(**entry)


def process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def is_leftover(rec: Record) -> bool:
    """A record of this host whose process has gone."""
    return rec.host == socket.gethostname() and not process_alive(rec.pid)


def restore_gpu(control: GpuControl, gpu: Gpu, entry: Restore) -> list[str]:
    """Put ``entry`` back on ``gpu``: each step tried even when one fails; the failures."""
    steps = []
    if entry.sm_clocks_locked:
        steps.append(lambda: control.reset_sm_clocks(gpu))
    if entry.memory_clocks_locked:
        steps.append(lambda: control.reset_memory_clocks(gpu))
    if entry.power_limit_w is not None:
        watts = entry.power_limit_w
        steps.append(lambda: control.set_power_limit(gpu, watts))
    failures = []
    for step in steps:
        try:
            step()
        except GpuControlError as exc:
            failures.append(str(exc))
    return failures


def restore_entries(lib: GpuLibrary, entries: list[Restore]) -> list[str]:
    """Restore every entry on the GPU with its UUID; the failures (empty: all put back)."""
    control = GpuControl(lib)
    by_uuid = {g.uuid: g for g in lib.gpus()}
    failures = []
    for entry in entries:
        gpu = by_uuid.get(entry.uuid)
        if gpu is None:
            failures.append(f"GPU {entry.uuid} is not on this machine any more")
            continue
        failures.extend(restore_gpu(control, gpu, entry))
    return failures


def restore_record(rec: Record) -> list[str]:
    """Restore one record and remove its file when everything went back; the failures."""
    try:
        lib = open_gpus()
    except GpuUnavailable as exc:
        return [f"no GPU library (NVML, amdsmi) can start ({exc})"]
    try:
        failures = restore_entries(lib, rec.gpus)
    finally:
        lib.shutdown()
    if not failures and rec.path is not None:
        rec.path.unlink(missing_ok=True)
    return failures


def restore_leftovers() -> list[Record]:
    """At llem's start: restore every leftover record of this host, logging one line for each;
    returns the records restored. Costs one directory listing when there are none."""
    restored = []
    for rec in read_records():
        if not is_leftover(rec):
            continue
        failures = restore_record(rec)
        what = "; ".join(g.describe() for g in rec.gpus)
        if failures:
            log.error(
                "GPU settings left by llem process %d could not all be restored (%s); the record "
                "%s stays: run `python -m llem.gpu restore` as root",
                rec.pid,
                "; ".join(failures),
                rec.path,
            )
            continue
        log.warning("restored GPU settings left by llem process %d (%s)", rec.pid, what)
        restored.append(rec)
    return restored

"""Model load times measured on this host, kept between runs so that a sweep's plan can estimate
the time its loads will take.

One file in llem's cache directory, ``<LLEM_CACHE_DIR, default ~/.cache/llem>/load_times.json``:
per host name and per load key (``Backend.load_key``, the key a kept model is reused by; it may
name a local path, which stays in the user's own cache), the last few load times in seconds, each
with the time it was measured. ``Runner`` adds one after each load that succeeded; a model kept
from the run before is no load and adds none. A server that llem launches counts from launch to
ready (its ``load_s``). A load time measured on another host says nothing about this one: only
this host's are read.

The file stays small: a key keeps its last ``KEEP_PER_KEY`` times, and the file the ``MAX_KEYS``
(host, key) entries measured most recently. Writes are atomic; two processes recording at
the same moment may lose one of the two times, never the file. A file that cannot be read or
written costs one warning line (once per process), never a run: it is read as empty, and a file
that could not be read is replaced by the next record.

Format history: 1, the first (``{"format": 1, "loads": [{"host", "key", "times": [{"s", "at"}]}]}``,
the entries in the order of their last record, the most recent last).
"""

from __future__ import annotations

import json
import logging
import math
import socket
from pathlib import Path
from typing import Any

from llem.atomic import atomic_write_json
from llem.cache import llem_cache_dir
from llem.result import utc_now

log = logging.getLogger(__name__)

LOAD_TIMES_FILE = "load_times.json"
LOAD_TIMES_FORMAT = 1
KEEP_PER_KEY = 5
MAX_KEYS = 300

# [{"host": name, "key": load key, "times": [{"s": seconds, "at": UTC ISO 8601}]}], the times
# oldest first and the entries by their last record, oldest first
Stored = list[dict[str, Any]]

_warned: set[str] = set()  # the files already warned about in this process


def load_times_path() -> Path:
    return llem_cache_dir() / LOAD_TIMES_FILE


def this_host_load_times(
    path: Path | None = None, host: str | None = None
) -> dict[str, list[float]]:
    """This host's recorded load times (s, oldest first) by load key; empty when none are."""
    host = host or socket.gethostname()
    return {
        e["key"]: [float(t["s"]) for t in e["times"]]
        for e in _read(path or load_times_path())
        if e["host"] == host
    }


def record_load(
    load_key: str, load_s: float, path: Path | None = None, host: str | None = None
) -> None:
    """Add one measured load of ``load_key`` that took ``load_s`` seconds (a negative or
    non-finite time is not recorded). Never raises for the file: a failure is a warning."""
    if not _seconds(load_s):
        return
    path = path or load_times_path()
    host = host or socket.gethostname()
    stored = _read(path)
    mine = [e for e in stored if (e["host"], e["key"]) == (host, load_key)]
    times = mine[0]["times"] if mine else []
    times = [*times, {"s": round(float(load_s), 3), "at": utc_now()}][-KEEP_PER_KEY:]
    stored = [e for e in stored if e not in mine] + [
        {"host": host, "key": load_key, "times": times}
    ]
    try:
        atomic_write_json(path, {"format": LOAD_TIMES_FORMAT, "loads": stored[-MAX_KEYS:]})
    except OSError as exc:
        _warn(path, f"load time cache {path} not writable ({exc}); this load time is not kept")


def _read(path: Path) -> Stored:
    try:
        return _parse(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        _warn(path, f"load time cache {path} not readable ({why}); ignored")
        return []


def _parse(data: Any) -> Stored:
    """The stored entries, checked; anything unexpected raises (the whole file is ignored)."""
    if data.get("format") != LOAD_TIMES_FORMAT:
        raise ValueError(f"format {data.get('format')!r}, this llem reads {LOAD_TIMES_FORMAT}")
    stored: Stored = []
    for entry in data["loads"]:
        host, key, times = entry["host"], entry["key"], entry["times"]
        if not isinstance(host, str) or not isinstance(key, str):
            raise ValueError(f"an entry of host {host!r} and key {key!r}")
        if not isinstance(times, list) or not times:
            raise ValueError(f"no list of times for a key of host {host!r}")
        for t in times:
            s = t["s"]
            if isinstance(s, bool) or not isinstance(s, int | float) or not _seconds(s):
                raise ValueError(f"a load time of {s!r}")
            if not isinstance(t["at"], str):
                raise ValueError(f"a measurement time of {t['at']!r}")
        stored.append(
            {"host": host, "key": key, "times": [{"s": t["s"], "at": t["at"]} for t in times]}
        )
    return stored


def _seconds(value: float) -> bool:
    return math.isfinite(value) and value >= 0


def _warn(path: Path, message: str) -> None:
    if str(path) not in _warned:
        _warned.add(str(path))
        log.warning("%s", message)

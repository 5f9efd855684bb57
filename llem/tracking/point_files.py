"""What a tracker is given of a point's files beside result.json, and of a search's record: pure
functions, no tracker imported.

- ``artifacts``: the point's files logged with its result.json, where the point has them:
  ``requests.jsonl`` (each request's figures and energy) and ``plots/``.
- ``timeline``: the window's samples (``timeseries.csv``) as a metric history, one metric per
  column that carries its unit (``timeline.power_w``, ``timeline.temperature_c``, ...; with more
  than one device ``timeline.<device>.power_w``), at step = milliseconds since the window's
  start. An empty cell (a reading that could not be taken) is no point of the history, never a 0.
- ``search_best``: a search's best configuration (``search.json``) as tags (``best.<knob>``,
  ``search.*``): tags, not parameters, because a resumed search may choose another best and a
  tracker's parameters cannot change.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from llem.measure.timeseries import TIMESERIES_FILE
from llem.result import RESULT_FILE
from llem.result.requests import REQUESTS_FILE
from llem.sweep.search_file import SearchRecord
from llem.tracking.figures import VALUE_MAX, safe_key

POINT_FILES = (RESULT_FILE, REQUESTS_FILE, "plots")
# timeseries.csv's columns that are no figure of the timeline
_NOT_READINGS = ("time_s", "device", "throttle_reasons")


@dataclass(frozen=True)
class TimelinePoint:
    """One reading of the window: its metric key, value and milliseconds since the start."""

    key: str
    value: float
    step_ms: int


def artifacts(run_dir: Path) -> list[Path]:
    """The point's files a tracker keeps, those it has: result.json, requests.jsonl, plots/."""
    return [run_dir / name for name in POINT_FILES if (run_dir / name).exists()]


def _number(cell: str | None) -> float | None:
    """A reading; None for an empty cell, text or a non-finite number (never a 0)."""
    try:
        value = float(cell) if cell not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def timeline(run_dir: Path) -> list[TimelinePoint]:
    """The window's readings from ``timeseries.csv``; empty where it is absent or unreadable."""
    try:
        with (run_dir / TIMESERIES_FILE).open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, ValueError, csv.Error):
        return []
    devices = {row.get("device") or "" for row in rows}
    out = []
    for row in rows:
        time_s = _number(row.get("time_s"))
        if time_s is None:
            continue
        where = f"{row.get('device')}." if len(devices) > 1 else ""
        for column, cell in row.items():
            value = _number(cell) if column not in _NOT_READINGS else None
            if value is not None:
                key = safe_key(f"timeline.{where}{column}")
                out.append(TimelinePoint(key, value, round(time_s * 1000)))
    return out


def search_best(sweep_dir: Path) -> dict[str, str] | None:
    """A search's best configuration and its confirmations as tags; None for a sweep that is
    no search. With no best, ``search.best`` says so."""
    record = SearchRecord.read(sweep_dir)
    if record is None:
        return None
    tags = {
        "search.objective": f"{record.direction} {record.objective}",
        "search.state": record.state,
        "search.trials": str(len(record.trials)),
        "search.confirm": str(record.confirm),
        "search.confirmations": str(len(record.confirmations())),
    }
    if record.stopped_because:
        tags["search.stopped_because"] = record.stopped_because[:VALUE_MAX]
    if record.unconfirmed:
        tags["search.unconfirmed"] = record.unconfirmed[:VALUE_MAX]
    best = record.best_trial()
    if best is None:
        tags["search.best"] = "none: no configuration is feasible in every run so far"
        return tags
    tags["search.best"] = f"#{best.dir}"
    tags["search.best_runs"] = str(record.best_runs)
    if record.best_mean is not None:
        tags[safe_key(f"search.best_mean.{record.objective}")] = repr(record.best_mean)
    for knob, value in best.knobs.items():
        tags[safe_key(f"best.{knob}")] = str(value)[:VALUE_MAX]
    return tags

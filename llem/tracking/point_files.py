"""What a tracker is given of a point's files beside result.json, and of a search's record: pure
functions, no tracker imported.

- ``artifacts``: the point's files logged with its result.json, where the point has them:
  ``requests.jsonl`` (each request's figures and energy) and ``plots/``.
- ``timeline``: the window's samples (``timeseries.csv``) as a metric history, one metric per
  column that carries its unit (``timeline.power_w``, ``timeline.temperature_c``, ...; with more
  than one device ``timeline.<device>.power_w``), at step = milliseconds since the window's
  start. An empty cell (a reading that could not be taken) is no point of the history, never a 0.
- ``histories``: the timeline's readings and, beside them on the same step axis, the engine's
  throughput from ``steps.csv`` (``timeline.prefill_tokens_per_s``,
  ``timeline.decode_tokens_per_s``: ``llem.tracking.throughput`` says how it is binned), each
  throughput history absent with its reason where it cannot be computed.
- ``search_best``: a search's best configuration (``search.json``) as tags (``best.<knob>``,
  ``search.*``): tags, not parameters, because a resumed search may choose another best and a
  tracker's parameters cannot change.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from llem.measure.timeseries import TIMESERIES_FILE
from llem.result import RESULT_FILE, STEPS_FILE, read_steps
from llem.result.requests import REQUESTS_FILE
from llem.sweep.search_file import SearchRecord
from llem.tracking import throughput
from llem.tracking.figures import VALUE_MAX, result_section, safe_key

if TYPE_CHECKING:
    from llem.plain import Json

POINT_FILES = (RESULT_FILE, REQUESTS_FILE, "plots")
# timeseries.csv's columns that are no figure of the timeline
_NOT_READINGS = ("time_s", "device", "throttle_reasons")


@dataclass(frozen=True)
class TimelinePoint:
    """One reading of the window: its metric key, value and milliseconds since the start."""

    key: str
    value: float
    step_ms: int


@dataclass(frozen=True)
class Histories:
    """A point's metric histories, and why each throughput history that is absent is absent
    (by its key)."""

    points: list[TimelinePoint]
    null_reasons: dict[str, str] = field(default_factory=dict)


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


def sampling_interval_s(readings: list[TimelinePoint]) -> float | None:
    """The timeline's sampling interval: the median gap between the readings of its most-read
    key (None with fewer than two readings of any key)."""
    steps: dict[str, list[int]] = {}
    for p in readings:
        steps.setdefault(p.key, []).append(p.step_ms)
    most = max(steps.values(), key=len, default=[])
    ordered = sorted(set(most))
    gaps = [b - a for a, b in zip(ordered, ordered[1:], strict=False)]
    return statistics.median(gaps) / 1000 if gaps else None


def throughput_key(phase: str) -> str:
    return f"timeline.{phase}_tokens_per_s"


def _window_s(result: dict[str, Json]) -> float:
    """result.json's ``energy.window_s``; 0 where it is null (the bins then end at the last
    step's end)."""
    value = result_section(result, "energy").get("window_s")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0


def throughput_history(
    run_dir: Path, result: dict[str, Json], sampling_s: float | None
) -> Histories:
    """The engine's prefill and decode tokens per second from ``steps.csv``, at step = ms since
    the window's start of each bin's start; up to the window's end (result.json's
    ``energy.window_s``, else the last step's end)."""
    keys = [throughput_key(phase) for phase in throughput.PHASES]
    try:
        steps = read_steps(run_dir)
    except FileNotFoundError:
        return Histories([], dict.fromkeys(keys, f"the point has no {STEPS_FILE}"))
    except (OSError, ValueError) as exc:  # ResultFormatError is a ValueError
        return Histories([], dict.fromkeys(keys, f"{STEPS_FILE} unreadable: {exc}"[:VALUE_MAX]))
    length_s = throughput.bin_s(sampling_s)
    points, reasons = [], {}
    for phase, key in zip(throughput.PHASES, keys, strict=True):
        got = throughput.phase_rates(steps, phase, _window_s(result), length_s)
        if got.null_reason is not None:
            reasons[key] = got.null_reason
        points += [TimelinePoint(key, rate, round(start * 1000)) for start, rate in got.rates]
    return Histories(points, reasons)


def histories(run_dir: Path, result: dict[str, Json]) -> Histories:
    """The window's readings (``timeline``) and the engine's throughput beside them."""
    readings = timeline(run_dir)
    rates = throughput_history(run_dir, result, sampling_interval_s(readings))
    return Histories(readings + rates.points, rates.null_reasons)


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

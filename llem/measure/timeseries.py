"""``timeseries.csv``: a window's samples, one row per sample per device (this module owns the
format). ``time_s`` counts from the window's start; an empty cell is a reading that could not be
taken; ``throttle_reasons`` names the reasons set, joined by ``|``.
"""

from __future__ import annotations

import csv
from pathlib import Path

from llem.measure.meter import WindowResult

TIMESERIES_FILE = "timeseries.csv"
TIMESERIES_COLUMNS = (
    "time_s",
    "device",
    "power_w",
    "temperature_c",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "throttle_reasons",
    "memory_used_mb",
    "gpu_util_pct",
    "mem_util_pct",
)


def write_timeseries(window: WindowResult, path: str | Path) -> int:
    """Write ``window``'s samples to ``path``; returns the number of rows."""
    start = window.start_s
    rows = 0
    with Path(path).open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(TIMESERIES_COLUMNS)
        for s in window.samples:
            reasons = "|".join(s.throttle_reasons or ())
            out.writerow(
                [
                    f"{s.time_s - start:.6f}",
                    s.device,
                    _cell(s.power_w),
                    _cell(s.temperature_c),
                    _cell(s.sm_clock_mhz),
                    _cell(s.mem_clock_mhz),
                    reasons,
                    _cell(s.memory_used_mb),
                    _cell(s.gpu_util_pct),
                    _cell(s.mem_util_pct),
                ]
            )
            rows += 1
    return rows


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"

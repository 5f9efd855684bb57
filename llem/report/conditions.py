"""The line under the table about recorded conditions: runs kept in the statistics, counted.

A check of the validity verdict either fails (the energy cannot be trusted: the run is left out of
the energy statistics and listed with its problems, see ``llem.report.notes.render_invalid``) or
finds a ``condition``: something that describes the measurement without making its energy
untrustworthy (the GPU at its power limit, warming inside the window after the cool-down, gaps in
the power readings beside an energy counter). Runs with conditions stay in every mean; this line
says how many there were and which conditions, so "kept" is as visible as "left out".
"""

from __future__ import annotations

import textwrap

import pandas as pd

from llem.report.cells import is_missing
from llem.report.load import Runs

CONDITION_MARK = "~"
CONDITION = "condition"  # a check's status in validity.checks

#: how the note names the condition each check can find (others by the check's name)
LABELS = {
    "throttling": "clocks held down for power (NVML sw_power_cap)",
    "temperature_steady": "warming inside the window",
    "sampler_coverage": "gaps in the power readings beside an energy counter",
}


def _runs_with_conditions(frame: pd.DataFrame) -> dict[str, int]:
    """Per check, how many ok runs it found a condition in (checks in column order)."""
    ok = frame["status"].astype(str) == "ok"
    counts: dict[str, int] = {}
    for column in frame.columns:
        if not column.startswith("validity.checks."):
            continue
        found = int(((frame[column].astype(str) == CONDITION) & ok).sum())
        if found:
            counts[column.removeprefix("validity.checks.")] = found
    return counts


def render_conditions(runs: Runs, width: int = 100) -> str:
    """One note (wrapped): how many ok runs were measured under recorded conditions, which, and
    that they are kept in the energy statistics; empty when there were none."""
    frame = runs.frame
    by_check = _runs_with_conditions(frame)
    if not by_check:
        return ""
    any_condition = pd.Series(False, index=frame.index)
    for check in by_check:
        any_condition |= frame[f"validity.checks.{check}"].astype(str) == CONDITION
    n = int((any_condition & (frame["status"].astype(str) == "ok")).sum())
    parts = [f"{LABELS.get(check, check)} in {k}" for check, k in by_check.items()]
    capped = frame.get("thermal.power_capped_fraction")
    if capped is not None and "throttling" in by_check:
        top = max((float(v) for v in capped if not is_missing(v)), default=0.0)
        parts[list(by_check).index("throttling")] += f" (up to {top:.0%} of the window)"
    text = (
        f"{CONDITION_MARK} {n} run{'s' if n != 1 else ''} measured under recorded conditions, "
        f"kept in the energy statistics (a condition does not make the energy untrustworthy): "
        f"{'; '.join(parts)}. See validity.conditions, thermal.power_capped_fraction and "
        "thermal.temp_rise_c in results.csv."
    )
    return "\n".join(textwrap.wrap(text, width=width, subsequent_indent="  "))

"""The report's lines on what it could not show: why J/tok is blank, and the plots not drawn.

Printed under the table by every report, the sweep's own at its end included (not only logged by
``python -m llem.report``): a blank J/tok column with no word on it reads as a fault. A reason that
the J/tok column and the plots share is said once.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import col
from llem.report.load import Runs
from llem.report.window import JTOK, headline

#: the start of the plots' line for the plots that need J/token (``llem.report.plots``)
JTOK_PLOTS = ("J/token plots", "pareto.png")


def _reasons(runs: Runs) -> list[str]:
    """The energy.unavailable_reason of the ok runs without J/token, most frequent first."""
    frame = runs.frame
    if "energy.unavailable_reason" not in frame.columns:
        return []
    ok = frame["status"].astype(str) == "ok"
    counts: dict[str, int] = {}
    jtok = col(frame, JTOK)
    for is_ok, value, why in zip(
        ok, jtok, frame["energy.unavailable_reason"].astype(object), strict=True
    ):
        if is_ok and is_missing(value) and not is_missing(why) and str(why):
            counts[str(why)] = counts.get(str(why), 0) + 1
    return sorted(counts, key=lambda r: -counts[r])


def render_gaps(runs: Runs, summary: pd.DataFrame, skipped: Sequence[str], width: int = 100) -> str:
    """Why J/tok is blank (where every row's is), and one line per plot not drawn; the J/token
    plots' line joins the J/tok one, so that their shared reason is said once."""
    rest = list(skipped)
    lines: list[str] = []
    means = col(summary, f"{headline(summary, JTOK)}.mean")
    measured = any(not is_missing(v) for v in col(runs.frame, JTOK))  # invalid ones included
    if len(summary) and all(is_missing(m) for m in means) and not measured:
        reasons = _reasons(runs)
        why = "; ".join(reasons) if reasons else "no run has a J/token figure"
        plots = [s for s in rest if s.startswith(JTOK_PLOTS)]
        rest = [s for s in rest if s not in plots]
        drawn = " and no J/token plot or pareto.png is drawn" if plots else ""
        lines += textwrap.wrap(
            f"J/tok is blank{drawn}: no run measured energy ({why})",
            width=width,
            subsequent_indent="  ",
        )
    for reason in rest:
        lines += textwrap.wrap(f"not drawn: {reason}", width=width, subsequent_indent="  ")
    return "\n".join(lines)

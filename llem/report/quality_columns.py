"""The printed table's quality columns (result schema 6's ``quality`` section, issue 32): the share
of answers judged correct with its 95% interval, and the energy per correct answer.

Both appear only where some row has a quality figure, so the table of runs that scored nothing is
what it was before (see ``llem.report.table``).

``acc %`` is the mean over the row's runs of ``quality.value`` (in %) and, in brackets, the mean
of the runs' own 95% intervals (``quality.ci95_low``/``ci95_high``, by the run's
``interval_method``: Wilson's for a proportion). Repeats of one configuration answer the same
prompts, so they do not narrow that interval: it says how far the task's sample of prompts pins
the accuracy down, and the mean of the runs' intervals is each run's. ``J/correct`` is the mean
of ``quality.j_per_correct_answer``, ``±`` the 95% CI over repeats as J/tok has it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import Column, col, figure_column
from llem.report.summary_metrics import QUALITY_METRICS

VALUE, LOW, HIGH = QUALITY_METRICS[:3]
J_PER_CORRECT = "quality.j_per_correct_answer"


def has_quality(summary: pd.DataFrame) -> bool:
    """Some row has an accuracy (a run of it scored its answers)."""
    return any(not is_missing(v) for v in col(summary, f"{VALUE}.mean"))


def _percent(value: Any) -> str:
    return f"{100 * float(value):.1f}"


def accuracy_cell(value: Any, low: Any, high: Any, interval: bool = True) -> str:
    """``72.0% (61.2–81.1)``; the value alone without an interval; '' without a value."""
    if is_missing(value):
        return ""
    text = f"{_percent(value)}%"
    if interval and not (is_missing(low) or is_missing(high)):
        text += f" ({_percent(low)}–{_percent(high)})"
    return text


def quality_columns(summary: pd.DataFrame, interval: bool, with_ci: bool) -> list[Column]:
    """``acc %`` (with its interval where ``interval``) and ``J/correct`` (``±`` its CI over
    repeats where ``with_ci``), where some row has an accuracy; none otherwise."""
    if not has_quality(summary):
        return []
    cells = [
        accuracy_cell(v, lo, hi, interval)
        for v, lo, hi in zip(
            col(summary, f"{VALUE}.mean"),
            col(summary, f"{LOW}.mean"),
            col(summary, f"{HIGH}.mean"),
            strict=True,
        )
    ]
    out = [Column("acc % (95% CI)" if interval else "acc %", cells, True)]
    if any(not is_missing(v) for v in col(summary, f"{J_PER_CORRECT}.mean")):
        out.append(figure_column(summary, "J/correct", J_PER_CORRECT, with_ci))
    return out


def quality_note(summary: pd.DataFrame) -> str | None:
    """What 'acc %' and 'J/correct' are, where they are shown."""
    if not has_quality(summary):
        return None
    shown = any(not is_missing(v) for v in col(summary, f"{J_PER_CORRECT}.mean"))
    per_answer = (
        "; J/correct = the window's energy per correct answer (quality.j_per_correct_answer; "
        "empty where no answer was correct or no energy was measured)"
        if shown
        else ""
    )
    return (
        "acc % = answers judged correct (quality.value, mean of ok repeats) with the runs' own "
        "95% interval over their scored answers (quality.interval_method; in summary.csv where "
        "not shown; repeats answer the same prompts, so they do not narrow it)" + per_answer
    )

"""What every kind of plot shares before drawing: the metrics, reading summary columns, labels,
and where invalid energy is marked. Pure: no matplotlib here."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from typing import Any

import pandas as pd

from llem.report.cells import is_missing
from llem.report.labels import basenames, format_number, shorten
from llem.report.load import Runs
from llem.report.repeat_stats import summarise
from llem.report.stats import (
    N_INVALID,
    N_LEFT_OUT,
    VALID,
    configuration_groups,
    judged_invalid,
)
from llem.report.window import HEADLINES, JTOK, TOKS, source, whole_metric, windows

#: metric -> (axis label, file name stem, title)
METRIC_LABELS = {
    TOKS: ("throughput (output tokens/s)", "tokens_per_s", "Throughput"),
    JTOK: ("energy per output token (J/token)", "j_per_token", "Energy per output token"),
}
for _whole, (_name, _) in HEADLINES.items():  # the window-chosen figures read the same
    if _whole in METRIC_LABELS:
        METRIC_LABELS[_name] = METRIC_LABELS[_whole]
MAX_LABEL = 34
INVALID_LABEL = "invalid energy"
#: per summary row: where to draw a hollow "invalid energy" marker (None: nowhere)
Hollow = Sequence[float | None]


class PlotSkipped(Exception):
    """A plot that cannot be drawn; the message says why."""


def values(frame: pd.DataFrame, column: str) -> list[Any]:
    """A column as plain Python values; a column that is absent reads as all None."""
    if column not in frame.columns:
        return [None] * len(frame)
    return frame[column].astype(object).tolist()


def floats(frame: pd.DataFrame, column: str) -> list[float]:
    """A column as floats, NaN where a figure is missing."""
    return [float("nan") if is_missing(v) else float(v) for v in values(frame, column)]


def is_numeric(items: Sequence[Any]) -> bool:
    present = [v for v in items if not is_missing(v)]
    return bool(present) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in present
    )


def safe_name(knob: str) -> str:
    """A knob as part of a file name."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", knob)


def label_value(v: Any) -> str:
    return "—" if is_missing(v) else (v if isinstance(v, str) else format_number(v))


def fit_parts(
    rows: Sequence[Sequence[str]], names: Sequence[str | None], limit: int = MAX_LABEL
) -> list[list[str]]:
    """Label parts, ``name=value`` (or the value where the name is None), one list per labelled
    thing with a value per name, made to fit ``limit`` characters a line while labels that differ
    stay different: path-like values to their last component where those stay distinct, a long
    part shortened in the middle (``Llama-3.1-8B-Inst…-finetuned-run-a``) where that keeps them
    apart, else wrapped whole over several lines. Never cut at the end, where two series would
    read the same."""
    columns = [basenames([row[j] for row in rows]) for j in range(len(names))]
    parts = [
        [v if name is None else f"{name}={v}" for name, v in zip(names, values, strict=True)]
        for values in zip(*columns, strict=True)
    ]
    n_distinct = len({tuple(r) for r in rows})
    short = [[shorten(x, limit) for x in r] for r in parts]
    if len({tuple(r) for r in short}) == n_distinct:
        return short
    return [
        [textwrap.fill(x, limit, break_long_words=True, break_on_hyphens=False) for x in r]
        for r in parts
    ]


def fit_labels(
    rows: Sequence[Sequence[str]], names: Sequence[str | None], limit: int = MAX_LABEL
) -> list[str]:
    """One label per row of values: ``, ``-joined on one line where every label fits ``limit``,
    else a line per part, each fitted by :func:`fit_parts`."""
    parts = fit_parts(rows, names, 10_000)  # last path components, nothing shortened
    one_line = [", ".join(r) for r in parts]
    if all(len(t) <= limit for t in one_line):
        return one_line
    return ["\n".join(r) for r in fit_parts(rows, names, limit)]


def no_result(status: Any, n_ok: Any) -> str | None:
    """Why a configuration has no figure at all: 'failed', 'skipped' or 'missing' (from its
    status label, e.g. 'failed ×3'); None when it has an ok run."""
    if not is_missing(n_ok) and int(n_ok) > 0:
        return None
    text = "" if is_missing(status) else str(status)
    for kind in ("failed", "skipped", "missing"):
        if kind in text:
            return kind
    return None


def nan_to_zero(items: Sequence[float]) -> tuple[float, ...]:
    return tuple(0.0 if math.isnan(v) else v for v in items)


def invalid_label(summary: pd.DataFrame) -> str:
    """The legend entry for hollow markers: whether the invalid runs are in the means."""
    left_out = sum(0 if is_missing(v) else int(v) for v in values(summary, N_LEFT_OUT))
    return f"{INVALID_LABEL} ({'left out of the means' if left_out else 'in the means'})"


def invalid_points(runs: Runs, summary: pd.DataFrame, metric: str) -> list[float | None]:
    """Per summary row, where to draw a hollow marker for invalid energy, or None.

    With the invalid runs left out (the default), the mean of their own values; with them kept
    in (``n_energy_left_out`` 0), the row's mean, which includes them.
    """
    groups = configuration_groups(runs)
    if len(groups) != len(summary) or VALID not in runs.frame.columns:
        return [None] * len(summary)
    frame = runs.frame
    valid = frame[VALID].astype(object).tolist()
    status = frame["status"].astype(str).tolist()
    whole = whole_metric(metric)  # a headline figure: each row's own window's figure
    rows_window = windows(summary) if whole != metric else [None] * len(summary)
    means = floats(summary, f"{metric}.mean")
    left_out = values(summary, N_LEFT_OUT)
    invalid = values(summary, N_INVALID)
    out: list[float | None] = []
    for i, group in enumerate(groups):
        if is_missing(invalid[i]) or not invalid[i]:
            out.append(None)
        elif is_missing(left_out[i]) or not left_out[i]:
            out.append(None if math.isnan(means[i]) else means[i])
        else:
            rows = [r for r in group.rows if status[r] == "ok" and judged_invalid(valid[r])]
            column = source(whole, rows_window[i]) if whole != metric else metric
            figures = values(frame, column)
            out.append(summarise([figures[r] for r in rows]).mean)
    return out

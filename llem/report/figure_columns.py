"""The figure columns of the table, after the knobs: tok/s, J/tok (its ``!`` mark and bound), the
serving, quality, TTFT and phase columns, peak MB, ``n`` and status."""

from __future__ import annotations

from typing import Any

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import (
    Column,
    col,
    concurrency_column,
    figure_column,
    goodput_columns,
    phase_columns,
    window_column,
)
from llem.report.footprint_columns import footprint_columns
from llem.report.labels import format_number, format_with_ci
from llem.report.notes import INVALID_MARK
from llem.report.quality_columns import quality_columns
from llem.report.stats import BOUND_SUFFIX, N_INVALID, N_LEFT_OUT, N_USED
from llem.report.ttft import ttft_columns
from llem.report.window import JTOK, TOKS, headline

#: 'peak MB' shows the first of these that any configuration has (GPU runs: torch's allocator peak;
#: CPU runs: the process's peak resident memory)
MEMORY_FIELDS = (
    "memory.peak_allocated_mb",
    "memory.peak_device_used_mb",
    "memory.peak_reserved_mb",
    "memory.peak_host_rss_mb",
)


def _count(value: Any) -> int:
    return 0 if is_missing(value) else int(value)


def memory_field(summary: pd.DataFrame) -> str | None:
    """The memory figure shown as 'peak MB': the first of MEMORY_FIELDS that any row has."""
    for name in MEMORY_FIELDS:
        if any(not is_missing(v) for v in col(summary, f"{name}.mean")):
            return name
    return None


def _plus_minus(mean: Any, half: Any) -> str:
    """'±0.036': ``half`` to the precision ``format_with_ci`` gives it beside ``mean``."""
    text = format_with_ci(mean, half)
    at = text.find(" ±")
    return text[at + 1 :] if at >= 0 else ""


def has_bound(summary: pd.DataFrame) -> bool:
    """Whether some row has a J/tok instrument bound (the 'J/tok bound' column)."""
    jtok = headline(summary, JTOK)
    return any(not is_missing(b) for b in col(summary, f"{jtok}.{BOUND_SUFFIX}"))


def _used_column(summary: pd.DataFrame) -> list[Column]:
    """'n', the runs every figure of a row comes from, where some row left runs out (elsewhere
    the ok count in 'status' says it)."""
    if not any(_count(v) for v in col(summary, N_LEFT_OUT)):
        return []
    return [Column("n", [format_number(n) for n in col(summary, N_USED)], True)]


def metric_columns(
    summary: pd.DataFrame, with_ci: bool, with_bound: bool, mem: str | None, interval: bool
) -> list[Column]:
    invalid = [_count(v) for v in col(summary, N_INVALID)]
    marks = [INVALID_MARK if n else " " for n in invalid] if any(invalid) else []
    toks, jtok_name = headline(summary, TOKS), headline(summary, JTOK)
    bound = []
    if with_bound:
        means = col(summary, f"{jtok_name}.mean")
        bounds = col(summary, f"{jtok_name}.{BOUND_SUFFIX}")
        bound_cells = [_plus_minus(m, b) for m, b in zip(means, bounds, strict=True)]
        bound = [Column("J/tok bound", bound_cells, True)]
    memory = (
        figure_column(summary, "peak MB", mem, False)
        if mem
        else Column("peak MB", [""] * len(summary), True)
    )
    return [
        *window_column(summary),
        figure_column(summary, "tok/s", toks, with_ci),
        figure_column(summary, "J/tok", jtok_name, with_ci, marks),
        *bound,
        *quality_columns(summary, interval, with_ci),
        *footprint_columns(summary, with_ci),
        *concurrency_column(summary),
        *ttft_columns(summary),
        *goodput_columns(summary),
        *phase_columns(summary),
        memory,
        *_used_column(summary),
        Column("status", [str(s) for s in col(summary, "status")], False),
    ]

"""The printed table: one row per configuration, laid out by rich for a 100-column terminal.

Columns: the knobs that vary in the loaded runs (header = last dotted component, or the last two
when that is ambiguous), ``GPU`` (model ×count) when the runs ran on different hardware, then
``tok/s`` and ``J/tok`` (mean over ok repeats, ``±`` the Student-t 95% CI half-width over the
repeats, none with fewer than two), ``J/tok bound`` (``±`` the runs' mean worst-case instrument
bound, in its own column because it is not a confidence interval; only when some row has one),
``TTFT p50 ms`` (one column per TTFT origin where rows differ, the origin in the header; a note
names each: ``llem.report.ttft``), ``peak MB``, ``n`` (the runs every figure of the row comes from;
only when some row left runs out) and ``status`` (``ok ×3``, ``ok ×2, failed ×1``). Serving runs
(result schema 3) add, where some row has them (``llem.report.columns``): ``traffic`` after the
knobs (kind, rate, closed-loop concurrency, less what the knob columns already say; only when some
traffic is not offline), ``window`` (steady | whole, only when rows differ), ``conc`` (mean running
batch) after J/tok, and ``good`` (% of requests meeting every SLO) and ``good tok/s`` after TTFT.
Scored runs (result schema 6) add ``acc %`` with its 95% interval and ``J/correct`` after J/tok
(``llem.report.quality_columns``).
Where some run has a steady state, tok/s, J/tok and conc come from each configuration's window
(``llem.report.window``) and a note says which. A ``!`` after J/tok marks a configuration with runs
whose energy was judged invalid (left out of every figure of the row unless ``--include-invalid``);
a note under the table counts them and :func:`render_invalid` lists their problems. Empty cells are
figures that do not exist (no energy on CPU, failed runs, every run invalid); they are never shown
as 0.

Figures: a mean to 3 significant digits; its ``±`` to 2 significant digits but never to more
decimals than the mean shows (``386 ±19``, ``22.5 ±0.4``). A half-width that rounds away at the
mean's precision is written as a limit, ``4.09 ±<0.01``, not as ``±0.000000004``
(:func:`llem.report.labels.format_with_ci`). A wide CI, a half-width of at least half the mean
(two repeats multiply their spread by Student's t = 12.7, three by 4.30), gets a ``*`` after it
and a note under the table saying that more repeats are needed, with the t of the marked rows'
repeat counts.

When the table would be wider than the terminal, path values go to their last component first,
then the traffic column goes (it comes back once the ``±`` parts have gone, if it then fits), then
the ``±`` parts; a table still too wide is printed in parts, one under the other, each with the
knobs of its rows (or, when the knobs take more than half the width, a numbered ``#N`` whose
legend follows the table). A value or a header is never cut (``llem.report.layout``), and a note
says what was done. Full values are always in results.csv and
summary.csv. The text is plain (no colour, no markup), whether or not it goes to a terminal.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from llem.figures.student_t import t_quantile
from llem.report.cells import is_missing
from llem.report.columns import (
    WIDE_MARK,
    Column,
    col,
    concurrency_column,
    figure_column,
    goodput_columns,
    phase_columns,
    serving_note,
    traffic_column,
    window_column,
)
from llem.report.labels import (
    basenames,
    ci_is_wide,
    format_number,
    format_with_ci,
    gpu_short,
    knob_headers,
    shorten,
)
from llem.report.layout import split_columns, table_lines, table_width
from llem.report.load import Runs
from llem.report.notes import (
    DEFAULT_WIDTH,
    INVALID_MARK,
    gpu_set_note,
    invalid_note,
    render_heading,
    render_invalid,
    render_problems,
)
from llem.report.quality_columns import quality_columns, quality_note
from llem.report.stats import BOUND_SUFFIX, GPU, N_INVALID, N_LEFT_OUT, N_USED
from llem.report.ttft import ttft_columns, ttft_note
from llem.report.window import headline, window_note

__all__ = [
    "DEFAULT_WIDTH",
    "basenames",
    "ci_is_wide",
    "format_number",
    "format_with_ci",
    "gpu_short",
    "knob_headers",
    "memory_field",
    "render_heading",
    "render_invalid",
    "render_problems",
    "render_table",
    "shorten",
]

TOKS = "throughput.output_tokens_per_s"
JTOK = "energy.j_per_output_token"
#: 'peak MB' shows the first of these that any configuration has (GPU runs: torch's allocator peak;
#: CPU runs: the process's peak resident memory)
MEMORY_FIELDS = (
    "memory.peak_allocated_mb",
    "memory.peak_device_used_mb",
    "memory.peak_reserved_mb",
    "memory.peak_host_rss_mb",
)
WIDE_NOTE = (
    f"{WIDE_MARK} wide 95% CI (half-width at least half the mean): too few repeats to pin the "
    "mean down ({why}); add repeats"
)
#: (paths to their last component, with ±, with the traffic column): tried in turn until the
#: table fits; then the knobs move into a legend (nothing is ever cut: ``llem.report.layout``)
FITS = (
    (False, True, True),
    (True, True, True),
    (True, True, False),
    (True, False, True),
    (True, False, False),
)
_Column = Column
_col = col
_figure_column = figure_column


def _count(value: Any) -> int:
    return 0 if is_missing(value) else int(value)


def memory_field(summary: pd.DataFrame) -> str | None:
    """The memory figure shown as 'peak MB': the first of MEMORY_FIELDS that any row has."""
    for name in MEMORY_FIELDS:
        if any(not is_missing(v) for v in _col(summary, f"{name}.mean")):
            return name
    return None


# --------------------------------------------------------------------------- columns


@dataclass(frozen=True)
class _Knobs:
    """The knob columns' headers and cells, before shortening."""

    keys: list[str]
    headers: dict[str, str]
    cells: dict[str, list[str]]
    numeric: dict[str, bool]

    def columns(self, short_paths: bool) -> list[_Column]:
        """The knob columns; with ``short_paths``, path-like values as their last component
        (where those stay distinct: ``labels.basenames``)."""
        cols = []
        for k in self.keys:
            cells = self.cells[k]
            if short_paths and not self.numeric[k]:
                cells = basenames(cells)
            cols.append(_Column(self.headers[k], cells, self.numeric[k]))
        return cols

    def shortened(self) -> list[str]:
        """The headers of the knob columns whose values ``columns(True)`` shortens."""
        return [
            self.headers[k]
            for k in self.keys
            if not self.numeric[k] and basenames(self.cells[k]) != self.cells[k]
        ]

    def describe(self, i: int) -> str:
        return " ".join(f"{self.headers[k]}={self.cells[k][i]}" for k in self.keys)


def _knobs(runs: Runs, summary: pd.DataFrame) -> _Knobs:
    keys = list(runs.knobs)
    headers = knob_headers(keys)
    cells = {
        k: [format_number(v) if not isinstance(v, str) else v for v in _col(summary, k)]
        for k in keys
    }
    numeric = {
        k: all(
            is_missing(v) or (isinstance(v, (int, float)) and not isinstance(v, bool))
            for v in _col(summary, k)
        )
        for k in keys
    }
    if GPU in summary.columns:  # the runs ran on different hardware: say which row is which
        keys.append(GPU)
        headers[GPU] = "GPU"
        cells[GPU] = [gpu_short(str(v)) for v in _col(summary, GPU)]
        numeric[GPU] = False
    return _Knobs(keys, headers, cells, numeric)


def _plus_minus(mean: Any, half: Any) -> str:
    """'±0.036': ``half`` to the precision ``format_with_ci`` gives it beside ``mean``."""
    text = format_with_ci(mean, half)
    at = text.find(" ±")
    return text[at + 1 :] if at >= 0 else ""


def has_bound(summary: pd.DataFrame) -> bool:
    """Whether some row has a J/tok instrument bound (the 'J/tok bound' column)."""
    jtok = headline(summary, JTOK)
    return any(not is_missing(b) for b in _col(summary, f"{jtok}.{BOUND_SUFFIX}"))


def _used_column(summary: pd.DataFrame) -> list[_Column]:
    """'n', the runs every figure of a row comes from, where some row left runs out (elsewhere
    the ok count in 'status' says it)."""
    if not any(_count(v) for v in _col(summary, N_LEFT_OUT)):
        return []
    return [_Column("n", [format_number(n) for n in _col(summary, N_USED)], True)]


def _metric_columns(
    summary: pd.DataFrame, with_ci: bool, with_bound: bool, mem: str | None, interval: bool
) -> list[_Column]:
    invalid = [_count(v) for v in _col(summary, N_INVALID)]
    marks = [INVALID_MARK if n else " " for n in invalid] if any(invalid) else []
    toks, jtok_name = headline(summary, TOKS), headline(summary, JTOK)
    bound = []
    if with_bound:
        means = _col(summary, f"{jtok_name}.mean")
        bounds = _col(summary, f"{jtok_name}.{BOUND_SUFFIX}")
        bound_cells = [_plus_minus(m, b) for m, b in zip(means, bounds, strict=True)]
        bound = [_Column("J/tok bound", bound_cells, True)]
    memory = (
        _figure_column(summary, "peak MB", mem, False)
        if mem
        else _Column("peak MB", [""] * len(summary), True)
    )
    return [
        *window_column(summary),
        _figure_column(summary, "tok/s", toks, with_ci),
        _figure_column(summary, "J/tok", jtok_name, with_ci, marks),
        *bound,
        *quality_columns(summary, interval, with_ci),
        *concurrency_column(summary),
        *ttft_columns(summary),
        *goodput_columns(summary),
        *phase_columns(summary),
        memory,
        *_used_column(summary),
        _Column("status", [str(s) for s in _col(summary, "status")], False),
    ]


def _wide_shown(columns: Sequence[_Column]) -> bool:
    """Whether some figure in the table carries the wide-CI mark."""
    return any(WIDE_MARK in cell for c in columns for cell in c.cells if "±" in cell)


@dataclass
class _Layout:
    """The table's parts (each a list of columns, printed one under the other), the legend
    under them (knobs that did not fit), whether the ± parts stayed, and what was done to fit."""

    parts: list[list[_Column]]
    legend: list[str] = field(default_factory=list)
    plus_minus: bool = True
    said: list[str] = field(default_factory=list)


def _fit(
    summary: pd.DataFrame, knobs: _Knobs, width: int, has_ci: bool, mem: str | None
) -> _Layout:
    """The columns laid out in ``width``: paths to their last component, then the traffic and
    ``±`` parts left out, then the knobs in a legend and the rest split into parts; no value or
    header is ever cut (``llem.report.layout``)."""
    bounded = has_bound(summary)
    traffic = traffic_column(summary, knobs.keys)
    for short_paths, ci, with_traffic in FITS:
        columns = knobs.columns(short_paths) + (traffic if with_traffic else [])
        columns += _metric_columns(summary, ci and has_ci, ci and bounded, mem, ci)
        if table_width(columns) <= width:
            said = []
            if short_paths and knobs.shortened():
                said.append(
                    f"{', '.join(knobs.shortened())}: the last path component (full paths in "
                    "summary.csv)"
                )
            if traffic and not with_traffic:
                said.append(f"traffic left out to fit {width} columns (traffic.* in summary.csv)")
            return _Layout([columns], [], ci, said)
    rest = traffic + _metric_columns(summary, False, False, mem, False)
    keys = knobs.columns(True)
    legend: list[str] = []
    if table_width(keys) > width // 2:  # too wide to repeat: the knobs go into a legend
        ids = [f"#{i + 1}" for i in range(len(summary))]
        for i, tag in enumerate(ids):
            legend += textwrap.wrap(
                f"{tag}  {knobs.describe(i)}", width=width, subsequent_indent=" " * (len(tag) + 2)
            )
        keys = [_Column("config", ids, False)]
    parts = split_columns(keys, rest, width)
    said = [f"{', '.join(knobs.shortened())}: the last path component (full paths in summary.csv)"]
    said = said if knobs.shortened() and not legend else []
    if len(parts) > 1:
        which = "config (#N)" if legend else "knobs"
        said.append(
            f"the table is printed in {len(parts)} parts to fit {width} columns, each with the "
            f"{which} of its rows"
        )
    return _Layout(parts, legend, False, said)


# --------------------------------------------------------------------------- the table


def _notes(summary: pd.DataFrame, plus_minus: bool, has_ci: bool, mem: str | None) -> list[str]:
    """What the figures are: means ± what, the bound column, and which memory figure."""
    notes = []
    bounded = has_bound(summary)
    if plus_minus and has_ci:
        notes.append("mean of ok repeats ± 95% CI half-width (Student t)")
    elif plus_minus and bounded:
        notes.append("mean of ok repeats (no CI: fewer than 2 repeats)")
    elif has_ci or bounded or any((n or 0) >= 2 for n in _col(summary, "n")):
        also = " and bounds" if bounded else ""
        notes.append(f"mean of ok repeats (95% CIs{also} in summary.csv)")
    if plus_minus and bounded:
        notes.append(
            "J/tok bound = the runs' mean worst-case instrument bound (sensor accuracy, "
            "counter, sampling; not a CI)"
        )
    if mem:
        notes.append(f"peak MB = {mem}")
    ttft = ttft_note(summary)
    if ttft:
        notes.append(ttft)
    below = (window_note(summary), serving_note(summary), quality_note(summary))
    serving = [n for n in below if n]
    return (["; ".join(notes)] if notes else []) + serving


def _wide_note(summary: pd.DataFrame) -> str:
    """The wide-CI note, with Student's t for the repeat counts of the figures marked wide (the
    runs each figure's CI comes from: ``<metric>.n``)."""
    counts: set[int] = set()
    for metric in (headline(summary, TOKS), headline(summary, JTOK)):
        means, halves = _col(summary, f"{metric}.mean"), _col(summary, f"{metric}.ci95_half")
        ns = _col(summary, f"{metric}.n")
        counts |= {
            int(n)
            for m, h, n in zip(means, halves, ns, strict=True)
            if ci_is_wide(m, h) and not is_missing(n)
        }
    parts = [
        f"with {n} repeats the spread is multiplied by t = {t_quantile(0.975, n - 1):.3g}"
        for n in sorted(counts)
        if n >= 2
    ]
    return WIDE_NOTE.format(why="; ".join(parts) or "Student's t grows as repeats fall")


def render_table(runs: Runs, summary: pd.DataFrame, width: int = DEFAULT_WIDTH) -> str:
    """The table, a legend when needed, and a footnote; at most ``width`` columns wide."""
    mem = memory_field(summary)
    has_ci = any(
        not is_missing(h)
        for m in (headline(summary, TOKS), headline(summary, JTOK))
        for h in _col(summary, f"{m}.ci95_half")
    )
    layout = _fit(summary, _knobs(runs, summary), width, has_ci, mem)
    lines: list[str] = []
    for i, part in enumerate(layout.parts):
        lines += ([""] if i else []) + table_lines(part)
    if layout.legend:
        lines += ["", *layout.legend]
    for note in _notes(summary, layout.plus_minus, has_ci, mem) + layout.said:
        lines += textwrap.wrap(note, width=width)
    columns = [c for part in layout.parts for c in part]
    if _wide_shown(columns):
        lines += textwrap.wrap(_wide_note(summary), width=width, subsequent_indent="  ")
    gpu_set = gpu_set_note(summary)
    if gpu_set:
        lines += textwrap.wrap(gpu_set, width=width)
    invalid = invalid_note(summary)
    if invalid:
        lines += textwrap.wrap(invalid, width=width, subsequent_indent="  ")
    return "\n".join(lines)

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

import pandas as pd

from llem.figures.student_t import t_quantile
from llem.report.cells import is_missing
from llem.report.columns import WIDE_MARK, Column, col, serving_note
from llem.report.figure_columns import has_bound, memory_field
from llem.report.fit import fit
from llem.report.knobs import knobs
from llem.report.labels import ci_is_wide
from llem.report.layout import table_lines
from llem.report.load import Runs
from llem.report.notes import DEFAULT_WIDTH, gpu_set_note, invalid_note
from llem.report.quality_columns import quality_note
from llem.report.ttft import ttft_note
from llem.report.window import JTOK, TOKS, headline, window_note

WIDE_NOTE = (
    f"{WIDE_MARK} wide 95% CI (half-width at least half the mean): too few repeats to pin the "
    "mean down ({why}); add repeats"
)


def _wide_shown(columns: Sequence[Column]) -> bool:
    """Whether some figure in the table carries the wide-CI mark."""
    return any(WIDE_MARK in cell for c in columns for cell in c.cells if "±" in cell)


def _notes(summary: pd.DataFrame, plus_minus: bool, has_ci: bool, mem: str | None) -> list[str]:
    """What the figures are: means ± what, the bound column, and which memory figure."""
    notes = []
    bounded = has_bound(summary)
    if plus_minus and has_ci:
        notes.append("mean of ok repeats ± 95% CI half-width (Student t)")
    elif plus_minus and bounded:
        notes.append("mean of ok repeats (no CI: fewer than 2 repeats)")
    elif has_ci or bounded or any((n or 0) >= 2 for n in col(summary, "n")):
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
        means, halves = col(summary, f"{metric}.mean"), col(summary, f"{metric}.ci95_half")
        ns = col(summary, f"{metric}.n")
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
        for h in col(summary, f"{m}.ci95_half")
    )
    layout = fit(summary, knobs(runs, summary), width, has_ci, mem)
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

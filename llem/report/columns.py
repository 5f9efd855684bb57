"""The printed table's columns for serving runs (result schema 3): the traffic a configuration
served, the window its headline figures come from, the concurrency that ran and the goodput.

Each appears only where some row has it, so the table of runs without serving sections is what it
was before (see ``llem.report.table``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llem.report.cells import is_missing
from llem.report.labels import ci_is_wide, format_number, format_with_ci
from llem.report.stats import FIT_CI_SUFFIX, STATIC
from llem.report.window import CONC, STEADY, WINDOW, headline, windows

#: the override keys that already show a part of the traffic column's text
KIND_KEYS = ("traffic", "traffic.kind")
RATE_KEY = "traffic.rate_per_s"
CONCURRENCY_KEY = "traffic.max_concurrency"
GOOD_FRACTION = "goodput.fraction"
GOOD_TOKS = "goodput.output_tokens_per_s"


@dataclass(frozen=True)
class Column:
    header: str
    cells: list[str]
    right: bool  # right-aligned (numbers)


def col(summary: pd.DataFrame, name: str) -> list[Any]:
    """A summary column as plain values; an absent one reads as all None."""
    if name not in summary.columns:
        return [None] * len(summary)
    return summary[name].astype(object).tolist()


def _present(cells: Sequence[Any]) -> bool:
    return any(not is_missing(v) for v in cells)


def _traffic_cell(kind: Any, rate: Any, max_conc: Any, knobs: Sequence[str]) -> str:
    parts = []
    if not any(k in knobs for k in KIND_KEYS) and not is_missing(kind):
        parts.append(str(kind))
    if RATE_KEY not in knobs and not is_missing(rate):
        parts.append(f"{format_number(rate)}/s")
    if CONCURRENCY_KEY not in knobs and not is_missing(max_conc):
        parts.append(f"×{format_number(max_conc)}")
    return " ".join(parts)


def traffic_column(summary: pd.DataFrame, knobs: Sequence[str]) -> list[Column]:
    """'traffic' (kind, rate, closed-loop concurrency: ``poisson 8/s``, ``concurrency ×16``)
    where some configuration's traffic is not offline; the parts already shown as knob columns
    are left out, and so is the column when nothing is left."""
    kinds = col(summary, "traffic.kind")
    if not any(not is_missing(k) and k != "offline" for k in kinds):
        return []
    cells = [
        _traffic_cell(kind, rate, conc, knobs)
        for kind, rate, conc in zip(
            kinds, col(summary, RATE_KEY), col(summary, CONCURRENCY_KEY), strict=True
        )
    ]
    return [Column("traffic", cells, False)] if any(cells) else []


def window_column(summary: pd.DataFrame) -> list[Column]:
    """'window' (steady | whole) where the rows' headline figures come from different windows."""
    if WINDOW not in summary.columns or len(set(windows(summary))) < 2:
        return []
    cells = ["steady" if w == STEADY else "whole" for w in windows(summary)]
    return [Column("window", cells, False)]


def concurrency_column(summary: pd.DataFrame) -> list[Column]:
    """'conc': the mean running batch (headline window), where some row has it; blank for a
    row of static batches (each runs the batch size to its end, so its running batch over the
    window, prefills and gaps included, reads as a fraction of a request: 0.34 at batch 1)."""
    means = col(summary, f"{headline(summary, CONC)}.mean")
    static = [s is True for s in col(summary, STATIC)]
    cells = ["" if st else format_number(m) for m, st in zip(means, static, strict=True)]
    if not any(cells):
        return []
    return [Column("conc", cells, True)]


def goodput_columns(summary: pd.DataFrame) -> list[Column]:
    """'good' (the fraction of requests that met every SLO, in %) and 'good tok/s' (their
    output tokens per second of the measured window), where some row has an SLO."""
    fractions = col(summary, f"{GOOD_FRACTION}.mean")
    if not _present(fractions):
        return []
    percent = ["" if is_missing(f) else f"{100 * float(f):.0f}%" for f in fractions]
    toks = [format_number(t) for t in col(summary, f"{GOOD_TOKS}.mean")]
    return [Column("good", percent, True), Column("good tok/s", toks, True)]


def serving_note(summary: pd.DataFrame) -> str | None:
    """What 'conc', 'good' and 'good tok/s' are, where they are shown."""
    notes = []
    if concurrency_column(summary):
        static = any(s is True for s in col(summary, STATIC))
        blank = "; none for static batches (each runs its batch to the end)" if static else ""
        notes.append(
            f"conc = mean running batch (requests between their first and last token){blank}"
        )
    if _present(col(summary, f"{GOOD_FRACTION}.mean")):
        notes.append(
            "good = requests meeting every SLO; good tok/s = their output tokens/s over the "
            "whole window"
        )
    if _present(col(summary, f"{PHASE_COLUMNS[0]}.mean")):
        notes.append(
            "pre/dec/gap % = the window's energy in prefill, decode and between engine steps; "
            "J/prefill tok, J/decode tok = the fitted step model's costs ± the 95% interval of "
            "the runs' mean (from each run's), shown only with one (README: where the energy "
            "goes)"
        )
    return "; ".join(notes) or None


PHASE_COLUMNS = ("energy.prefill_j", "energy.decode_j", "energy.between_steps_j")
PER_TOKEN = (
    ("J/prefill tok", "energy.j_per_prefill_token"),
    ("J/decode tok", "energy.j_per_decode_token"),
)


def _split_cell(parts: Sequence[Any]) -> str:
    if any(is_missing(p) for p in parts) or sum(float(p) for p in parts) <= 0:
        return ""
    total = sum(float(p) for p in parts)
    return "/".join(f"{100 * float(p) / total:.0f}" for p in parts)


def phase_columns(summary: pd.DataFrame) -> list[Column]:
    """'pre/dec/gap %' (the window's energy in prefill, decode and between engine steps, in %)
    and the fitted 'J/prefill tok' and 'J/decode tok', where some row has the attribution
    (``llem.figures.attribution``)."""
    phases = [col(summary, f"{p}.mean") for p in PHASE_COLUMNS]
    if not _present(phases[0]):
        return []
    cells = [_split_cell(parts) for parts in zip(*phases, strict=True)]
    out = [Column("pre/dec/gap %", cells, True)]
    for header, metric in PER_TOKEN:
        means = col(summary, f"{metric}.mean")
        halves = col(summary, f"{metric}.{FIT_CI_SUFFIX}")
        cells = [_with_interval(m, h) for m, h in zip(means, halves, strict=True)]
        if any(cells):
            out.append(Column(f"{header} ±95%", cells, True))
    return out


def _with_interval(mean: Any, half: Any) -> str:
    """A fitted cost with the 95% interval of the runs' mean (``stats.FIT_CI_SUFFIX``); none
    without one (a null figure, or a result without the interval): a bare coefficient reads as
    more precise than the fit can say."""
    if is_missing(mean) or is_missing(half):
        return ""
    return format_with_ci(mean, half)


#: after a mean ± CI whose half-width is at least half the mean (``labels.ci_is_wide``)
WIDE_MARK = "*"


def marked(header: str, cells: list[str], marks: list[str]) -> Column:
    """A right-aligned column with a mark glued after each figure (the figures stay aligned):
    padded here, since rich would strip a trailing blank."""
    mark_width = max(len(m) for m in marks)
    width = max([len(c) for c in cells] + [len(header) - mark_width])
    return Column(
        header.rjust(width + mark_width),
        [c.rjust(width) + m.ljust(mark_width) for c, m in zip(cells, marks, strict=True)],
        False,
    )


def figure_column(
    summary: pd.DataFrame, header: str, metric: str, ci: bool, after: Sequence[str] = ()
) -> Column:
    """Means (``± CI`` with ``ci``); a wide CI gets :data:`WIDE_MARK` after it, and the marks in
    ``after`` (one per row) follow."""
    means = col(summary, f"{metric}.mean")
    if not ci:
        cells = [format_number(m) for m in means]
        wide = [""] * len(means)
    else:
        halves = col(summary, f"{metric}.ci95_half")
        cells = [format_with_ci(m, h) for m, h in zip(means, halves, strict=True)]
        wide = [WIDE_MARK if ci_is_wide(m, h) else "" for m, h in zip(means, halves, strict=True)]
    if any(wide):
        wide = [w.ljust(len(WIDE_MARK)) for w in wide]
    marks = [w + a for w, a in zip(wide, list(after) or [""] * len(wide), strict=True)]
    return (
        marked(header, cells, marks)
        if any(m.strip() for m in marks)
        else Column(header, cells, True)
    )

"""``tokens_per_s_vs_<knob>.png`` and ``j_per_token_vs_<knob>.png``: a metric against one knob.

The mean over ok repeats, 95% CI error bars where a configuration has at least two, one series
per combination of the other varying knobs. Numbers on x are joined by lines; categories (decoder
presets, any text knob) are markers only, since nothing lies between them and their order means
nothing. A missing figure is a gap in its line, never 0; a configuration with no ok run (failed,
skipped) is an x at the bottom of the axes in its series' colour, with a legend entry saying why,
and a series whose every point is such an x says so in its legend text ("bnb-4bit (failed)").
Invalid energy is drawn hollow (see :func:`llem.report.plots.common.invalid_points`). Legend
texts are never cut at the end: long ones are shortened in the middle or wrapped, so that two
series never read the same (:func:`llem.report.plots.common.fit_labels`).

:func:`prepare_knob` turns the summary into a :class:`KnobPlot` (the numbers and labels drawn);
:func:`draw_knob` draws one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llem.report.cells import is_missing
from llem.report.labels import basenames, knob_axis_label, knob_headers, shorten
from llem.report.plots.common import (
    METRIC_LABELS,
    Hollow,
    PlotSkipped,
    fit_labels,
    floats,
    invalid_label,
    is_numeric,
    label_value,
    no_result,
    values,
)
from llem.report.plots.style import (
    draw_failed,
    draw_hollow,
    failed_handle,
    hollow_handle,
    new_figure,
    plain_log_ticks,
    save,
    side_legend,
    style_axes,
    titles,
)
from llem.report.window import short_window, whole_metric


@dataclass(frozen=True)
class KnobSeries:
    """One line: a combination of the other knobs' values."""

    label: str | None  # legend text; None for the only line
    xs: tuple[float, ...]  # positions, nudged so that lines do not hide each other
    ys: tuple[float, ...]  # means; NaN is a gap in the line
    errs: tuple[float, ...] | None  # 95% CI half-widths; None: no error bars on this line
    hollow: tuple[tuple[float, float], ...] = ()  # (x, y) of "invalid energy" markers
    failed: tuple[float, ...] = ()  # x of configurations without an ok run (an x at the axis)


@dataclass(frozen=True)
class KnobPlot:
    """Everything drawn on a per-knob plot."""

    knob: str
    metric: str
    title: str
    note: str  # the grey line under the title
    ylabel: str
    series: tuple[KnobSeries, ...]
    ticks: tuple[float, ...]
    tick_labels: tuple[str, ...]
    numeric: bool  # numbers on x (joined by lines) or categories (markers only: no order)
    log_x: bool  # log2 axis: numbers spanning a wide ratio
    log_y: bool  # log axis: a tenfold spread of values
    rotate_ticks: bool  # long category names
    legend_title: str | None
    legend_series: bool  # the lines are in the legend
    invalid_label: str | None  # legend entry for hollow markers; None when there are none
    failed_label: str | None = None  # legend entry for the x marks; None when there are none

    @property
    def xlabel(self) -> str:
        return knob_axis_label(self.knob)

    @property
    def legend(self) -> bool:
        return self.legend_series or self.invalid_label is not None or self.failed_label is not None


@dataclass(frozen=True)
class _XAxis:
    order: list[Any]  # the knob's values, left to right
    position: dict[Any, float]
    numeric: bool
    log: bool

    def place(self, value: Any, shift: float) -> float:
        """Where a value of a series ``shift`` off the middle is drawn."""
        x = self.position[value]
        if self.log:
            return x * 2 ** (shift * 0.6)
        if self.numeric:
            return x + shift * _min_step(list(self.position.values())) * 0.5
        return x + shift


def _x_axis(raw: Sequence[Any]) -> _XAxis:
    """Numbers as numbers (log2 when they span a wide ratio), text as categories."""
    order: list[Any] = []
    for v in raw:
        if not is_missing(v) and v not in order:
            order.append(v)
    if not is_numeric(raw):
        return _XAxis(order, {v: float(i) for i, v in enumerate(order)}, False, False)
    order.sort()
    log = all(v > 0 for v in order) and len(order) >= 3 and max(order) / min(order) >= 8
    return _XAxis(order, {v: float(v) for v in order}, True, log)


def _min_step(xs: list[float]) -> float:
    xs = sorted(set(xs))
    steps = [b - a for a, b in zip(xs, xs[1:], strict=False) if b > a]
    return min(steps) if steps else 1.0


def _dodge(series: Sequence[list[int]], x: Sequence[float], drawn: Sequence[bool]) -> list[float]:
    """Per summary row, its offset from its tick: the series with something drawn at one x are
    spread apart there, in series order; a point alone at its x sits on its tick."""
    at: dict[float, list[int]] = {}
    for rows in series:
        for i in rows:
            if drawn[i]:
                at.setdefault(x[i], []).append(i)
    shift = [0.0] * len(x)
    for rows in at.values():
        for i, s in zip(rows, _shifts(len(rows)), strict=True):
            shift[i] = s
    return shift


def _shifts(n: int) -> list[float]:
    """Each series' offset from the middle, so that lines at one x do not sit on each other."""
    if n <= 1:
        return [0.0] * n
    return [(i - (n - 1) / 2) * (0.18 / (n - 1)) for i in range(n)]


def _series_labels(
    keys: Sequence[tuple[str, ...]], others: Sequence[str], headers: dict[str, str]
) -> list[str | None]:
    """Legend texts, distinct for distinct series (never cut at the end); the knob's name
    is left to the legend's title where only one other knob varies."""
    if not others:
        return [None] * len(keys)
    names = [None] if len(others) == 1 else [headers[k] for k in others]
    return list(fit_labels(keys, names))


def _series(
    summary: pd.DataFrame,
    knob: str,
    metric: str,
    headers: dict[str, str],
    marks: Sequence[float],
) -> tuple[_XAxis, list[KnobSeries], list[str]]:
    """The x axis, the series, and why configurations drawn as x marks have no figure."""
    others = [k for k in headers if k != knob]
    raw = values(summary, knob)
    axis = _x_axis(raw)
    other_values = {k: values(summary, k) for k in others}
    rows: dict[tuple[str, ...], list[int]] = {}
    for i, v in enumerate(raw):
        if not is_missing(v):
            key = tuple(label_value(other_values[k][i]) for k in others)
            rows.setdefault(key, []).append(i)
    means = floats(summary, f"{metric}.mean")
    halves = floats(summary, f"{metric}.ci95_half")
    n_ok, status = values(summary, "n"), values(summary, "status")
    why = [no_result(s, n) for s, n in zip(status, n_ok, strict=True)]
    labels = _series_labels(list(rows), others, headers)
    drawn = [
        not math.isnan(means[i]) or not math.isnan(marks[i]) or why[i] is not None
        for i in range(len(raw))
    ]
    shifts = _dodge(list(rows.values()), [axis.position.get(v, 0.0) for v in raw], drawn)
    out = []
    for label, idx in zip(labels, rows.values(), strict=True):
        idx = sorted(idx, key=lambda i: axis.position[raw[i]])
        xs = tuple(axis.place(raw[i], shifts[i]) for i in idx)
        errs = tuple(0.0 if math.isnan(halves[i]) else halves[i] for i in idx)
        hollow = tuple(
            (x, marks[i]) for x, i in zip(xs, idx, strict=True) if not math.isnan(marks[i])
        )
        failed = tuple(x for x, i in zip(xs, idx, strict=True) if why[i] is not None)
        if label is not None and len(failed) == len(idx):
            label += f" ({why[idx[0]]})"  # every point of this series: an x, no line
        out.append(
            KnobSeries(
                label=label,
                xs=xs,
                ys=tuple(means[i] for i in idx),
                errs=errs if any(e > 0 for e in errs) else None,
                hollow=hollow,
                failed=failed,
            )
        )
    kinds = [w for i, w in enumerate(why) if w is not None and not is_missing(raw[i])]
    return axis, out, sorted(set(kinds), key=kinds.index)


def _note(
    any_ci: bool,
    any_hollow: bool,
    log_y: bool,
    failed: Sequence[str] = (),
    window: str | None = None,
) -> str:
    ci = "95% CI (Student t)"  # over repeats; the instrument bounds are in summary.csv
    note = "mean of ok repeats" + (f" ({window})" if window else "")
    note += f", error bars: {ci}" if any_ci else ""
    note += "; hollow: invalid energy" if any_hollow else ""
    note += f"; x at the axis: no ok run ({', '.join(failed)})" if failed else ""
    return note + ("; log scale" if log_y else "")


def prepare_knob(
    summary: pd.DataFrame,
    knobs: Sequence[str],
    knob: str,
    metric: str,
    hollow: Hollow | None = None,
) -> KnobPlot:
    """``metric`` against ``knob``: one line per combination of the other ``knobs``.

    ``hollow`` (one entry per summary row, see ``invalid_points``) adds hollow markers for
    invalid energy and a legend entry for them. Raises :class:`PlotSkipped` when no
    configuration has the metric.
    """
    ylabel, _, title = METRIC_LABELS[metric]
    headline_metric = whole_metric(metric) != metric
    means = floats(summary, f"{metric}.mean")
    marks = [float("nan") if v is None else float(v) for v in (hollow or [None] * len(summary))]
    present = [m for m in means + marks if not math.isnan(m)]
    if not present:
        raise PlotSkipped(f"no configuration has {metric}")
    headers = knob_headers(knobs)
    others = [k for k in knobs if k != knob]
    axis, series, failed = _series(summary, knob, metric, headers, marks)
    tick_labels = tuple(shorten(t, 24) for t in basenames([label_value(v) for v in axis.order]))
    any_hollow = any(s.hollow for s in series)
    log_y = min(present) > 0 and max(present) / min(present) >= 10
    any_ci = any(s.errs is not None for s in series)
    return KnobPlot(
        knob=knob,
        metric=metric,
        title=f"{title} vs {headers[knob]}",
        note=_note(
            any_ci,
            any_hollow,
            log_y,
            failed,
            short_window(summary) if headline_metric else None,
        ),
        ylabel=ylabel,
        series=tuple(series),
        ticks=tuple(axis.position.values()),
        tick_labels=tick_labels,
        numeric=axis.numeric,
        log_x=axis.log,
        log_y=log_y,
        rotate_ticks=not axis.numeric and sum(len(t) for t in tick_labels) > 60,
        legend_title=headers[others[0]] if len(others) == 1 else None,
        legend_series=len(series) > 1,
        invalid_label=invalid_label(summary) if any_hollow else None,
        failed_label=f"no ok run ({', '.join(failed)})" if failed else None,
    )


# --------------------------------------------------------------------------- drawing

#: matplotlib's default colour cycle's length, and a marker for each time round it
COLOURS = 10
MARKERS = ("o", "s", "^", "D", "v", "P")


def _draw_x_axis(ax: Any, plot: KnobPlot) -> None:
    from matplotlib.ticker import FixedLocator, NullLocator

    if plot.log_x:
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(list(plot.ticks)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(list(plot.ticks), list(plot.tick_labels))
    if plot.rotate_ticks:
        ax.tick_params(axis="x", labelrotation=25)
        for lbl in ax.get_xticklabels():
            lbl.set_horizontalalignment("right")
    if plot.numeric:
        ax.margins(x=0.08)
    else:
        ax.set_xlim(-0.5, len(plot.ticks) - 0.5)
    ax.set_xlabel(plot.xlabel)


def _draw_legend(ax: Any, plot: KnobPlot) -> None:
    handles, labels = ax.get_legend_handles_labels() if plot.legend_series else ([], [])
    if plot.invalid_label is not None:
        handles.append(hollow_handle())
        labels.append(plot.invalid_label)
    if plot.failed_label is not None:
        handles.append(failed_handle())
        labels.append(plot.failed_label)
    side_legend(ax, handles, labels, title=plot.legend_title)


def draw_knob(plot: KnobPlot, path: Path | None = None) -> Any:
    """Draw ``plot`` on a new Agg figure, write it to ``path`` as a PNG; return the figure."""
    fig = new_figure()
    ax = fig.add_subplot()
    for i, s in enumerate(plot.series):
        bars = ax.errorbar(
            list(s.xs),
            list(s.ys),
            yerr=list(s.errs) if s.errs is not None else None,
            # the colour cycle has 10 colours: the 11th series on take another marker
            marker=MARKERS[i // COLOURS % len(MARKERS)],
            markersize=5,
            linewidth=1.6,
            # categories have no order and no in-between: markers only, no line joins them
            linestyle="-" if plot.numeric else "none",
            capsize=3,
            elinewidth=1.0,
            label=s.label,
        )
        if s.hollow:
            draw_hollow(ax, s.hollow, bars.lines[0].get_color())
        if s.failed:
            draw_failed(ax, s.failed, bars.lines[0].get_color())
    _draw_x_axis(ax, plot)
    ax.set_ylabel(plot.ylabel)
    if plot.log_y:
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    else:
        ax.set_ylim(bottom=0)
    titles(fig, ax, plot.title, plot.note)
    if plot.legend:
        _draw_legend(ax, plot)
    style_axes(ax)
    return save(fig, path)


def knob_figure(
    summary: pd.DataFrame,
    knobs: Sequence[str],
    knob: str,
    metric: str,
    hollow: Hollow | None = None,
) -> Any:
    """The figure of :func:`prepare_knob` (not written anywhere)."""
    return draw_knob(prepare_knob(summary, knobs, knob, metric, hollow))

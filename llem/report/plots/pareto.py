"""``pareto.png``: every configuration's tokens/s against J/token.

The frontier (no other configuration is both faster and cheaper) is joined up and labelled with
its knob values; with few points the others are labelled quietly too (in grey, where they fit),
and the subtitle says which. Invalid energy is drawn
hollow, and a configuration whose only J/token is invalid takes no part in the front. The 95% CI
bars are cut at 0 (two repeats multiply their spread by t = 12.7, which would run the axes to
negative tokens/s), the linear axes start at 0 at the least, and the subtitle says so.

:func:`prepare_pareto` turns the summary into a :class:`ParetoPlot`; :func:`draw_pareto` draws it,
placing each label where it overlaps no other label and no marker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llem.figures.pareto import pareto_front
from llem.report.labels import knob_headers
from llem.report.plots.common import (
    METRIC_LABELS,
    Hollow,
    PlotSkipped,
    fit_parts,
    floats,
    invalid_label,
    label_value,
    nan_to_zero,
    values,
)
from llem.report.plots.pareto_labels import ParetoLabel, place_labels
from llem.report.plots.style import (
    draw_hollow,
    hollow_handle,
    new_figure,
    plain_log_ticks,
    save,
    style_axes,
    titles,
)
from llem.report.window import JTOK, TOKS, headline, short_window

TITLE = "Pareto front: throughput vs energy per token"
PARETO_FIGSIZE = (7.5, 5.2)
#: with at most this many points, the dominated and invalid ones are labelled too
LABEL_ALL_UP_TO = 10
#: hollow marker rim colour by the point's role
HOLLOW_COLORS = {"front": "tab:blue", "dominated": "0.6", "invalid": "0.45"}


@dataclass(frozen=True)
class ParetoPoint:
    """A configuration's means with their 95% CI half-widths (0 where there is none); the bars
    below the mean are cut at zero (``xlow``, ``ylow``: at most the mean), as neither figure can
    be negative."""

    x: float  # tokens/s
    y: float  # J/token
    xerr: float
    yerr: float
    xerr_low: float | None = None  # an interval that is not symmetric: the bar below x

    @property
    def xlow(self) -> float:
        below = self.xerr if self.xerr_low is None else self.xerr_low
        return min(below, max(self.x, 0.0))

    @property
    def ylow(self) -> float:
        return min(self.yerr, max(self.y, 0.0))

    @property
    def cut(self) -> bool:
        """Whether a CI bar reached below zero and was cut there."""
        below = self.xerr if self.xerr_low is None else self.xerr_low
        return self.xlow < below or self.ylow < self.yerr


@dataclass(frozen=True)
class ParetoPlot:
    front: tuple[ParetoPoint, ...]  # by tokens/s: the line joins them in this order
    dominated: tuple[ParetoPoint, ...]
    #: hollow "invalid energy" markers: (x, y, role), role one of HOLLOW_COLORS
    hollow: tuple[tuple[float, float, str], ...]
    labels: tuple[ParetoLabel, ...]  # placed in this order: the front first
    log_x: bool
    log_y: bool
    invalid_label: str | None  # legend entry for the hollow markers; None when there are none
    title: str = TITLE
    labels_all: bool = False  # the dominated points are labelled too (in grey, where they fit)
    window: str | None = None  # which window the figures come from (``llem.report.window``)
    xlabel: str = METRIC_LABELS[TOKS][0] + "  →  faster"
    ylabel: str = METRIC_LABELS[JTOK][0] + "  ↓  cheaper"
    subtitle: str | None = None  # what the figures and bars are, where not the note below

    @property
    def note(self) -> str:
        if self.subtitle is not None:
            return self.subtitle
        hollow = "; hollow: invalid energy" if self.hollow else ""
        labelled = (
            "front labelled in black, the others in grey where they fit"
            if self.labels_all
            else "front points labelled"
        )
        window = f"; {self.window}" if self.window else ""
        cut = "; 95% CI bars cut at 0" if self.cut else ""
        return f"mean of ok repeats{window}; better is bottom right; {labelled}{hollow}{cut}"

    @property
    def cut(self) -> bool:
        """Whether some CI bar reached below zero (it is drawn cut there, the axes from 0)."""
        return any(p.cut for p in (*self.front, *self.dominated))


def _usable(toks: list[float], jtok: list[float], hollow: Hollow | None) -> list[int]:
    """Rows with both means; raises PlotSkipped when fewer than two."""
    usable = [i for i in range(len(toks)) if not (math.isnan(toks[i]) or math.isnan(jtok[i]))]
    if not usable:
        valid = " a valid" if any(v is not None for v in hollow or []) else ""
        raise PlotSkipped(f"no configuration has both tokens/s and{valid} J/token")
    if len(usable) < 2:
        raise PlotSkipped("it needs at least two configurations with tokens/s and J/token")
    return usable


def point_labels(
    summary: pd.DataFrame,
    knobs: Sequence[str],
    points: tuple[list[float], dict[int, float]],
    front: list[int],
) -> tuple[ParetoLabel, ...]:
    """The front's labels by tokens/s, then (few points only) the others', quietly; ``points``
    are the drawn points' (tokens/s by row, J/token by drawn row)."""
    toks, ys = points
    headers = knob_headers(knobs)
    columns = {k: values(summary, k) for k in knobs}
    rows = list(ys)
    fitted = fit_parts(
        [[label_value(columns[k][i]) for k in knobs] for i in rows], [headers[k] for k in knobs]
    )
    parts = dict(zip(rows, fitted, strict=True))

    def describe(i: int, sep: str) -> str:
        return sep.join(parts[i]) if parts[i] else "this run"

    labels = [
        ParetoLabel(toks[i], ys[i], describe(i, "\n"), True)
        for i in sorted(front, key=lambda i: toks[i])
    ]
    if len(ys) <= LABEL_ALL_UP_TO:
        labels += [
            ParetoLabel(toks[i], y, describe(i, ", "), False)
            for i, y in ys.items()
            if i not in front
        ]
    return tuple(labels)


def _spans_tenfold(items: Sequence[float]) -> bool:
    return max(items) / max(min(items), 1e-12) >= 10


def prepare_pareto(
    summary: pd.DataFrame,
    knobs: Sequence[str],
    hollow: Hollow | None = None,
    hollow_toks: Hollow | None = None,
) -> ParetoPlot:
    """Tokens/s against J/token per configuration, the front found and labelled.

    ``hollow`` (one entry per summary row, see ``invalid_points``) marks invalid energy at its
    J/token; ``hollow_toks`` gives the tokens/s of those marks where the row has none (every run
    invalid: they are left out of its tokens/s too). Raises :class:`PlotSkipped` when fewer than
    two configurations have both figures.
    """
    toks_name, jtok_name = headline(summary, TOKS), headline(summary, JTOK)
    toks = floats(summary, f"{toks_name}.mean")
    for i, x in enumerate(hollow_toks or []):
        if math.isnan(toks[i]) and x is not None:
            toks[i] = float(x)
    jtok = floats(summary, f"{jtok_name}.mean")
    usable = _usable(toks, jtok, hollow)
    front = [usable[k] for k in pareto_front([(toks[i], jtok[i]) for i in usable])]
    t_half = nan_to_zero(floats(summary, f"{toks_name}.ci95_half"))
    j_half = nan_to_zero(floats(summary, f"{jtok_name}.ci95_half"))

    def point(i: int) -> ParetoPoint:
        return ParetoPoint(toks[i], jtok[i], t_half[i], j_half[i])

    marks = {
        i: float(v) for i, v in enumerate(hollow or []) if v is not None and not math.isnan(toks[i])
    }
    roles = {i: "front" if i in front else "dominated" if i in usable else "invalid" for i in marks}
    # drawn points: usable ones at their mean, invalid-only ones at their hollow marker
    ys = {i: jtok[i] for i in usable} | {i: y for i, y in marks.items() if i not in usable}
    labels = point_labels(summary, knobs, (toks, ys), front)
    return ParetoPlot(
        front=tuple(point(i) for i in sorted(front, key=lambda i: toks[i])),
        dominated=tuple(point(i) for i in usable if i not in front),
        hollow=tuple((toks[i], y, roles[i]) for i, y in marks.items()),
        labels=labels,
        log_x=_spans_tenfold([toks[i] for i in ys]),
        log_y=_spans_tenfold(list(ys.values())),
        invalid_label=invalid_label(summary) if marks else None,
        labels_all=any(not label.strong for label in labels),
        window=short_window(summary),
    )


# --------------------------------------------------------------------------- drawing


def _draw_points(ax: Any, points: Sequence[ParetoPoint], color: str, size: int, z: int) -> None:
    label = "Pareto front" if color == HOLLOW_COLORS["front"] else "dominated"
    xs, ys = [p.x for p in points], [p.y for p in points]
    ax.errorbar(
        xs,
        ys,
        xerr=[[p.xlow for p in points], [p.xerr for p in points]],
        yerr=[[p.ylow for p in points], [p.yerr for p in points]],
        fmt="none",
        ecolor=color,
        elinewidth=0.8,
        alpha=0.45,
        zorder=z - 1,
    )
    ax.scatter(xs, ys, s=size, color=color, zorder=z, label=label)


def _draw_axes(fig: Any, ax: Any, plot: ParetoPlot) -> None:
    if plot.log_x:
        ax.set_xscale("log")
        plain_log_ticks(ax.xaxis)
    if plot.log_y:
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    ax.margins(x=0.12, y=0.12)
    # neither figure can be negative: the bars are cut at 0, and so are the margins
    if not plot.log_x and ax.get_xlim()[0] < 0:
        ax.set_xlim(left=0)
    if not plot.log_y and ax.get_ylim()[0] < 0:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(plot.xlabel)
    ax.set_ylabel(plot.ylabel)
    titles(fig, ax, plot.title, plot.note)
    handles, texts = ax.get_legend_handles_labels()
    if plot.invalid_label is not None:
        handles.append(hollow_handle())
        texts.append(plot.invalid_label)
    ax.legend(handles, texts, fontsize=8, frameon=False, loc="upper right")
    style_axes(ax)


def draw_pareto(plot: ParetoPlot, path: Path | None = None) -> Any:
    """Draw ``plot`` on a new Agg figure, write it to ``path`` as a PNG; return the figure."""
    fig = new_figure(PARETO_FIGSIZE)
    ax = fig.add_subplot()
    if plot.dominated:
        _draw_points(ax, plot.dominated, HOLLOW_COLORS["dominated"], 30, 2)
    _draw_points(ax, plot.front, HOLLOW_COLORS["front"], 45, 3)
    ax.plot(
        [p.x for p in plot.front],
        [p.y for p in plot.front],
        color=HOLLOW_COLORS["front"],
        linewidth=1.2,
        alpha=0.8,
        zorder=2,
    )
    for x, y, role in plot.hollow:
        draw_hollow(ax, [(x, y)], HOLLOW_COLORS[role])
    _draw_axes(fig, ax, plot)
    place_labels(fig, ax, plot.labels)
    return save(fig, path)


def pareto_figure(
    summary: pd.DataFrame,
    knobs: Sequence[str],
    hollow: Hollow | None = None,
    hollow_toks: Hollow | None = None,
) -> Any:
    """The figure of :func:`prepare_pareto` (not written anywhere)."""
    return draw_pareto(prepare_pareto(summary, knobs, hollow, hollow_toks))

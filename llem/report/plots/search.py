"""``search_trials.png``: a search's trials (``llem.report.search``), its objective against the
trial number (1 = the first trial run, as the sweep's log counts them).

Feasible search trials are filled dots; infeasible ones that have the objective are hollow (a
constraint missed); trials without the objective (failed, skipped, the figure not measured) are an
x at the bottom edge; confirmation trials (the best measured again) are diamonds, filled where
they met every constraint. A step line follows the best feasible objective so far, and the best
trial is annotated with its trial number (the x axis'), its directory (the number the printed
search section gives it, ``#4``) and value. The y axis is the objective's key with its unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llem.report.labels import figure_axis_label, format_number, shorten
from llem.report.plots.common import PlotSkipped
from llem.report.plots.style import (
    draw_failed,
    failed_handle,
    new_figure,
    plain_log_ticks,
    save,
    side_legend,
    style_axes,
    titles,
)
from llem.report.search import SearchView

SEARCH_PLOT = "search_trials.png"
MAX_NOTE = 110


@dataclass(frozen=True)
class Marks:
    """Trials drawn alike: their x (trial, from 1) and objective values."""

    kind: str  # feasible | infeasible | confirm | confirm_infeasible
    label: str  # the legend entry
    xs: tuple[int, ...]
    ys: tuple[float, ...]


@dataclass(frozen=True)
class SearchPlot:
    title: str
    note: str
    ylabel: str
    marks: tuple[Marks, ...]
    missing: tuple[int, ...]  # trials without the objective (an x at the bottom)
    best_so_far: tuple[tuple[int, float], ...]  # the step line's corners
    best: tuple[int, float, str] | None  # (x, y, annotation)
    best_on_top: bool  # maximised: the best is high, so its annotation goes under it
    n_trials: int
    log_y: bool


_LABELS = {
    "feasible": "feasible",
    "infeasible": "infeasible (a constraint missed)",
    "confirm": "confirmation of the best",
    "confirm_infeasible": "confirmation, infeasible",
}


def _kind(kind: str, feasible: bool) -> str:
    base = "confirm" if kind == "confirm" else ""
    if base:
        return base if feasible else "confirm_infeasible"
    return "feasible" if feasible else "infeasible"


def _best_so_far(view: SearchView) -> list[tuple[int, float]]:
    sign = 1.0 if view.record.direction == "minimize" else -1.0
    best: float | None = None
    corners: list[tuple[int, float]] = []
    for t in view.trials:
        rec, value = t.record, t.record.objective
        counts = rec.kind == "search" and rec.feasible and value is not None
        if counts and value is not None and (best is None or sign * value < sign * best):
            best = value
        if best is not None:
            corners.append((rec.number + 1, best))
    return corners


def prepare_search_plot(view: SearchView) -> SearchPlot:
    """The numbers drawn in search_trials.png; PlotSkipped when no trial has the objective."""
    objective = view.record.objective
    groups: dict[str, tuple[list[int], list[float]]] = {}
    missing: list[int] = []
    for t in view.trials:
        rec = t.record
        if rec.objective is None:
            missing.append(rec.number + 1)
            continue
        xs, ys = groups.setdefault(_kind(rec.kind, rec.feasible), ([], []))
        xs.append(rec.number + 1)
        ys.append(rec.objective)
    if not groups:
        raise PlotSkipped(f"no trial of the search measured {objective}")
    marks = tuple(
        Marks(kind, _LABELS[kind], tuple(groups[kind][0]), tuple(groups[kind][1]))
        for kind in _LABELS
        if kind in groups
    )
    best = None
    if view.best is not None:
        rec = view.best.trial.record
        assert rec.objective is not None  # the best feasible trial has it
        trial = rec.number + 1  # the x axis' number; its directory (the text's #) beside it
        text = f"best: trial {trial} (dir {rec.dir}) {format_number(rec.objective)}"
        best = (trial, rec.objective, text)
    where = "; ".join(view.record.constraints) or "no constraints"
    all_y = [y for m in marks for y in m.ys]
    return SearchPlot(
        title="Search trials",
        note=shorten(f"{view.record.direction} {objective} subject to {where}", MAX_NOTE),
        ylabel=figure_axis_label(objective),
        marks=marks,
        missing=tuple(missing),
        best_so_far=tuple(_best_so_far(view)),
        best=best,
        best_on_top=view.record.direction == "maximize",
        n_trials=len(view.trials),
        log_y=min(all_y) > 0 and max(all_y) / min(all_y) >= 10,
    )


# --------------------------------------------------------------------------- drawing

#: kind -> matplotlib marker keywords
_STYLE: dict[str, dict[str, Any]] = {
    "feasible": {"marker": "o", "color": "C0"},
    "infeasible": {"marker": "o", "markerfacecolor": "white", "color": "C3"},
    "confirm": {"marker": "D", "color": "C2"},
    "confirm_infeasible": {"marker": "D", "markerfacecolor": "white", "color": "C2"},
}


def _handles(ax: Any, plot: SearchPlot) -> tuple[list[Any], list[str]]:
    handles, labels = ax.get_legend_handles_labels()
    if plot.missing:
        handles.append(failed_handle())
        labels.append("no objective (failed or not measured)")
    return handles, labels


def _draw_best(ax: Any, plot: SearchPlot) -> None:
    if plot.best_so_far:
        corners = list(plot.best_so_far)
        ax.step(
            [x for x, _ in corners],
            [y for _, y in corners],
            where="post",
            color="0.35",
            linewidth=1.2,
            label="best feasible so far",
            zorder=2,
        )
    if plot.best is None:
        return
    x, y, text = plot.best
    ax.plot(
        [x],
        [y],
        marker="*",
        markersize=14,
        color="C1",
        linestyle="none",
        zorder=5,
        label="best feasible",
    )
    # the step line reaches the best from the worse side and runs on to the right at its level:
    # the label goes on the better side, to the left where there is room
    left = x > 1
    ax.annotate(
        text,
        (x, y),
        xytext=(-10 if left else 10, 14 if plot.best_on_top else -14),
        textcoords="offset points",
        ha="right" if left else "left",
        va="center",
        fontsize=8,
        bbox={
            "boxstyle": "round,pad=0.2",
            "facecolor": "white",
            "edgecolor": "none",
            "alpha": 0.85,
        },
        arrowprops={"arrowstyle": "-", "color": "0.4", "linewidth": 0.8},
        zorder=7,
    )


def _limits(ax: Any, plot: SearchPlot) -> None:
    """Room above and below the points for the best's label, and under them a band for the x
    marks of trials without the objective, so that no x reads as a value."""
    from matplotlib.ticker import MaxNLocator

    ys = [y for m in plot.marks for y in m.ys]
    lo, hi = min(ys), max(ys)
    if plot.log_y:
        span = math.log10(hi / lo) or 1.0
        ax.set_ylim(lo / 10 ** (span * (0.25 if plot.missing else 0.08)), hi * 10 ** (span * 0.12))
    else:
        span = (hi - lo) or abs(hi) or 1.0
        ax.set_ylim(lo - span * (0.25 if plot.missing else 0.08), hi + span * 0.12)
    ax.set_xlim(0.5, plot.n_trials + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def draw_search(plot: SearchPlot, path: Path | None = None) -> Any:
    """Draw ``plot`` on a new Agg figure (to ``path`` as a PNG, when given); return it."""
    fig = new_figure()
    ax = fig.add_subplot()
    for m in plot.marks:
        ax.plot(
            list(m.xs),
            list(m.ys),
            linestyle="none",
            markersize=7,
            markeredgewidth=1.5,
            label=m.label,
            zorder=4,
            **_STYLE[m.kind],
        )
    _draw_best(ax, plot)
    if plot.log_y:
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    _limits(ax, plot)
    if plot.missing:
        draw_failed(ax, plot.missing, "0.3")
    ax.set_xlabel("trial (in the order run)")
    ax.set_ylabel(plot.ylabel)
    titles(fig, ax, plot.title, plot.note)
    side_legend(ax, *_handles(ax, plot))
    style_axes(ax)
    return save(fig, path)

"""``quality_pareto.png``: every configuration's accuracy against its energy per correct answer,
with the Pareto front (accuracy up, energy down), over a sweep whose runs scored their answers
(result schema 6's ``quality`` section, issue 32).

Energy is J per correct answer (``quality.j_per_correct_answer``), not J per output token: it is
what a right answer costs, the figure a quality search minimises, and it holds what J/token hides
(a cheap configuration that answers wrongly, or at length, pays for it here). Accuracy is the mean
of ``quality.value`` over the configuration's repeats, in %.

The bars: accuracy from the mean of the runs' own 95% intervals (``ci95_low``..``ci95_high``,
Wilson's for a proportion: asymmetric, and not narrowed by repeats, which answer the same
prompts); energy ``±`` the 95% CI over repeats plus the runs' mean worst-case bound (limits add
linearly: ``llem.report.repeat_stats``), each 0 where there is none, cut at 0. The subtitle says
so. The plot is drawn with ``pareto.png``'s front, bars and labels (``llem.report.plots.pareto``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from llem.figures.pareto import pareto_front
from llem.report.plots.common import PlotSkipped, floats, nan_to_zero
from llem.report.plots.pareto import ParetoPlot, ParetoPoint, point_labels
from llem.report.stats import BOUND_SUFFIX

QUALITY_PLOT = "quality_pareto.png"
QUALITY_TITLE = "Pareto front: accuracy vs energy per correct answer"
VALUE = "quality.value"
J_CORRECT = "quality.j_per_correct_answer"
XLABEL = "accuracy, % of answers judged correct (quality.value)  →  better"
YLABEL = "energy per correct answer (J)  ↓  cheaper"
WHY = (
    "J per correct answer: what a right answer costs (J/token hides wrong or long answers);\n"
    "mean of ok repeats; better is bottom right; bars: accuracy's 95% interval (the runs' own),\n"
    "energy's 95% CI over repeats + worst-case bound"
)


def _energy_bar(summary: pd.DataFrame) -> tuple[float, ...]:
    """Per row: the CI half-width over repeats plus the runs' mean bound (0 for a missing one)."""
    halves = nan_to_zero(floats(summary, f"{J_CORRECT}.ci95_half"))
    bounds = nan_to_zero(floats(summary, f"{J_CORRECT}.{BOUND_SUFFIX}"))
    return tuple(h + b for h, b in zip(halves, bounds, strict=True))


def _usable(acc: list[float], energy: list[float]) -> list[int]:
    usable = [i for i in range(len(acc)) if not (math.isnan(acc[i]) or math.isnan(energy[i]))]
    if len(usable) < 2:
        scored = sum(1 for a in acc if not math.isnan(a))
        raise PlotSkipped(
            f"it needs at least two configurations with an accuracy and J per correct answer "
            f"({scored} scored, {len(usable)} with both: J per correct answer needs measured "
            "energy and a correct answer)"
        )
    return usable


def prepare_quality_pareto(summary: pd.DataFrame, knobs: Sequence[str]) -> ParetoPlot:
    """Accuracy (%) against J per correct answer per configuration, the front found and
    labelled. Raises :class:`PlotSkipped` when fewer than two configurations have both."""
    acc = [100.0 * v for v in floats(summary, f"{VALUE}.mean")]
    energy = floats(summary, f"{J_CORRECT}.mean")
    usable = _usable(acc, energy)
    front = [usable[k] for k in pareto_front([(acc[i], energy[i]) for i in usable])]
    low = floats(summary, "quality.ci95_low.mean")
    high = floats(summary, "quality.ci95_high.mean")
    bars = _energy_bar(summary)

    def point(i: int) -> ParetoPoint:
        below = 0.0 if math.isnan(low[i]) else max(acc[i] - 100.0 * low[i], 0.0)
        above = 0.0 if math.isnan(high[i]) else max(100.0 * high[i] - acc[i], 0.0)
        return ParetoPoint(acc[i], energy[i], above, bars[i], xerr_low=below)

    ys = {i: energy[i] for i in usable}
    labels = point_labels(summary, knobs, (acc, ys), front)
    values = list(ys.values())
    return ParetoPlot(
        front=tuple(point(i) for i in sorted(front, key=lambda i: acc[i])),
        dominated=tuple(point(i) for i in usable if i not in front),
        hollow=(),
        labels=labels,
        log_x=False,
        log_y=max(values) / max(min(values), 1e-12) >= 10,
        invalid_label=None,
        title=QUALITY_TITLE,
        labels_all=any(not label.strong for label in labels),
        xlabel=XLABEL,
        ylabel=YLABEL,
        subtitle=WHY,
    )

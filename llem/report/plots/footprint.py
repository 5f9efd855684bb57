"""``carbon_pareto.png`` and ``cost_pareto.png``: every configuration's carbon, or money, against
its quality, or where no run scored its answers against its latency, with the Pareto front
(``docs/footprint.md``).

- **Against quality** (some run scored): accuracy in % (``quality.value``) against gCO2e per
  correct answer (``footprint.g_per_correct_answer``), or USD per correct answer (energy cost plus
  capacity cost, each where a price was given).
- **Against latency** (none scored): the median end-to-end latency (``latency.e2e_ms.p50``, lower
  is better) against gCO2e per 1,000 output tokens, or USD per million output tokens.

A configuration whose figure comes from a **modelled** layer (``footprint.layer_label``, a
modelled chassis or the facility's PUE) is drawn hollow and never stands on the front: a modelled
figure is the user's model, not a measurement to rank against one; the legend says so. The bars:
the 95% CI over repeats plus the runs' mean worst-case bound (capacity cost has no bound: a
price times the window). Drawn with ``pareto.png``'s front, bars and labels
(``llem.report.plots.pareto``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from llem.figures.pareto import pareto_front
from llem.report.cells import is_missing
from llem.report.footprint_metrics import CAPACITY_USD, ENERGY_USD, G_PER_1K, LAYER_LABEL
from llem.report.plots.common import PlotSkipped, floats, nan_to_zero, values
from llem.report.plots.pareto import ParetoPlot, ParetoPoint, point_labels
from llem.report.stats import BOUND_SUFFIX
from llem.result.footprint import MODELLED

CARBON_PLOT = "carbon_pareto.png"
COST_PLOT = "cost_pareto.png"
ACCURACY = "quality.value"
E2E_LATENCY = "latency.e2e_ms.p50"
MODELLED_LEGEND = "hollow: from a modelled layer (footprint.layer_label), never on the front"


@dataclass(frozen=True)
class YAxis:
    """A y axis: the summary metrics it adds up (one, or energy and capacity cost), its label."""

    metrics: tuple[str, ...]
    label: str


CARBON = {
    True: YAxis(("footprint.g_per_correct_answer",), "gCO2e per correct answer"),
    False: YAxis((G_PER_1K,), "gCO2e per 1,000 output tokens"),
}
COST = {
    True: YAxis(
        ("footprint.energy_usd_per_correct_answer", "footprint.capacity_usd_per_correct_answer"),
        "USD per correct answer",
    ),
    False: YAxis((ENERGY_USD, CAPACITY_USD), "USD per million output tokens"),
}


def scored(summary: pd.DataFrame) -> bool:
    return any(not math.isnan(v) for v in floats(summary, f"{ACCURACY}.mean"))


def _y(summary: pd.DataFrame, measure: YAxis) -> tuple[list[float], list[float], str]:
    """Per row: the measure's sum over the metrics the row has, its bar, and what was added
    (NaN where the row has none of them)."""
    means = [floats(summary, f"{m}.mean") for m in measure.metrics]
    bars = [
        [
            h + b
            for h, b in zip(
                nan_to_zero(floats(summary, f"{m}.ci95_half")),
                nan_to_zero(floats(summary, f"{m}.{BOUND_SUFFIX}")),
                strict=True,
            )
        ]
        for m in measure.metrics
    ]
    ys, errs = [], []
    for i in range(len(summary)):
        present = [k for k in range(len(means)) if not math.isnan(means[k][i])]
        ys.append(sum(means[k][i] for k in present) if present else math.nan)
        errs.append(sum(bars[k][i] for k in present))
    used = [
        m.split(".")[-1]
        for k, m in enumerate(measure.metrics)
        if any(not math.isnan(v) for v in means[k])
    ]
    return ys, errs, " + ".join(used)


def prepare_footprint_pareto(summary: pd.DataFrame, knobs: Sequence[str], kind: str) -> ParetoPlot:
    """``kind`` carbon or cost: the figure against accuracy (where scored) or median latency,
    the front found among the measured rows. Raises :class:`PlotSkipped` with fewer than two
    configurations that have both."""
    by_quality = scored(summary)
    measure = (CARBON if kind == "carbon" else COST)[by_quality]
    if by_quality:
        xs = [100.0 * v for v in floats(summary, f"{ACCURACY}.mean")]
        xlabel, sign = "accuracy, % of answers judged correct (quality.value)  →  better", 1.0
    else:
        xs = floats(summary, f"{E2E_LATENCY}.mean")
        xlabel, sign = "median end-to-end latency (ms, latency.e2e_ms.p50)  ←  faster", -1.0
    ys, errs, used = _y(summary, measure)
    usable = [i for i in range(len(xs)) if not (math.isnan(xs[i]) or math.isnan(ys[i]))]
    if len(usable) < 2:
        raise PlotSkipped(
            f"it needs at least two configurations with {measure.label} and "
            f"{'an accuracy' if by_quality else 'a latency'} ({len(usable)} have both)"
        )
    modelled = {i for i, v in enumerate(values(summary, LAYER_LABEL)) if v == MODELLED}
    ranked = [i for i in usable if i not in modelled]
    front = [ranked[k] for k in pareto_front([(sign * xs[i], ys[i]) for i in ranked])]

    def point(i: int) -> ParetoPoint:
        return ParetoPoint(xs[i], ys[i], 0.0, errs[i])

    hollow = [i for i in usable if i in modelled]
    labels = point_labels(summary, knobs, (xs, {i: ys[i] for i in usable}), front)
    drawn = [ys[i] for i in usable]
    return ParetoPlot(
        front=tuple(point(i) for i in sorted(front, key=lambda i: xs[i])),
        dominated=tuple(point(i) for i in ranked if i not in front),
        hollow=tuple((xs[i], ys[i], "dominated") for i in hollow),
        labels=labels,
        log_x=False,
        log_y=max(drawn) / max(min(drawn), 1e-12) >= 10,
        invalid_label=MODELLED_LEGEND if hollow else None,
        title=f"Pareto front: {'accuracy' if by_quality else 'latency'} vs {measure.label}",
        labels_all=any(not label.strong for label in labels),
        xlabel=xlabel,
        ylabel=f"{measure.label} ({used})  ↓  less",
        subtitle=(
            "mean of ok repeats; better is bottom "
            + ("right" if by_quality else "left")
            + "; bars: 95% CI over repeats + worst-case bound"
            + ("; hollow: modelled layer" if hollow else "")
        ),
    )


def has_footprint(summary: pd.DataFrame, kind: str) -> bool:
    """Some row has the figure the plot of ``kind`` draws."""
    measures = (CARBON if kind == "carbon" else COST).values()
    return any(
        not math.isnan(v)
        for measure in measures
        for m in measure.metrics
        for v in floats(summary, f"{m}.mean")
    )


#: what a run was given for each plot: a grid intensity, or a price
ASKED = {
    "carbon": ("footprint.intensity_g_per_kwh",),
    "cost": ("footprint.usd_per_kwh", "footprint.usd_per_gpu_hour", "footprint.usd_per_node_hour"),
}


def asked_footprint(frame: pd.DataFrame, kind: str) -> bool:
    """Some run was given what the plot of ``kind`` needs (an intensity, a price)."""
    return any(not is_missing(v) for key in ASKED[kind] for v in values(frame, key))


def footprint_null(frame: pd.DataFrame, kind: str) -> str:
    """The most common reason the runs give for the plot's figure being null."""
    key = "footprint.g_per_output_token" if kind == "carbon" else ENERGY_USD
    reasons = [str(v) for v in values(frame, f"null_reasons.{key}") if not is_missing(v) and v]
    return max(set(reasons), key=reasons.count) if reasons else "no figure in any run"

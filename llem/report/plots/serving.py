"""Serving plots: one figure against another that the run achieved, each point labelled with the
knob value that drove it.

* ``ttft_p90_vs_throughput.png`` and ``tpot_p90_vs_throughput.png``, over a rate sweep
  (``traffic.rate_per_s`` varies): the p90 TTFT and TPOT (over every request) against the output
  tokens/s achieved (the headline window: ``llem.report.window``), points labelled with the rate;
  the latency a server pays for its throughput (vLLM ``bench serve``'s view).
* ``j_per_token_vs_concurrency.png``: J per output token against the mean running batch (both from
  the headline window), points labelled with the knob that bounds them
  (an engine's concurrency knob, ``pytorch.batch_size`` or ``vllm.max_num_seqs``, then
  ``traffic.max_concurrency``, the rate); the ML.ENERGY leaderboard's energy-per-token curve, on
  what ran rather than on the knob.

One series per combination of the other knobs. :func:`prepare_latency_throughput` and
:func:`prepare_energy_concurrency` turn the summary into an :class:`XYPlot`; :func:`draw_xy` draws
one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llem.config.engines import ENGINES
from llem.report.labels import knob_headers
from llem.report.plots.common import PlotSkipped, fit_labels, floats, label_value, values
from llem.report.plots.style import (
    new_figure,
    plain_log_ticks,
    save,
    side_legend,
    style_axes,
    titles,
)
from llem.report.ttft import ttft_origins
from llem.report.window import CONC, JTOK, TOKS, headline, short_window

RATE_KNOB = "traffic.rate_per_s"
#: knobs that bound how many requests are in flight: the concurrency plot labels its points with
#: the first one that varies, and its series are the other knobs
LOAD_KNOBS = (
    *(row.concurrency_knob for row in ENGINES),  # each engine's (llem.config.engines)
    "traffic.max_concurrency",
    RATE_KNOB,
    "traffic.n_requests",
)
LATENCY = {
    "ttft": ("latency.ttft_ms.p90", "TTFT p90 (ms)", "Time to first token"),
    "tpot": ("latency.tpot_ms.p90", "TPOT p90 (ms)", "Time per output token"),
}


@dataclass(frozen=True)
class XYSeries:
    label: str | None  # legend text; None for the only series
    xs: tuple[float, ...]  # in the order of the driving knob
    ys: tuple[float, ...]
    point_labels: tuple[str, ...]  # the driving knob's value at each point


@dataclass(frozen=True)
class XYPlot:
    title: str
    note: str
    xlabel: str
    ylabel: str
    series: tuple[XYSeries, ...]
    log_x: bool
    log_y: bool
    legend_title: str | None


def _spans_tenfold(items: Sequence[float]) -> bool:
    return min(items) > 0 and max(items) / min(items) >= 10


def _series(
    summary: pd.DataFrame, knobs: Sequence[str], driver: str, x: str, y: str, unit: str
) -> list[XYSeries]:
    """One series per combination of the knobs other than ``driver``, points in its order."""
    others = [k for k in knobs if k != driver]
    headers = knob_headers(knobs)
    xs, ys, drive = (
        floats(summary, f"{x}.mean"),
        floats(summary, f"{y}.mean"),
        values(summary, driver),
    )
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in range(len(summary)):
        if not (math.isnan(xs[i]) or math.isnan(ys[i])):
            key = tuple(label_value(values(summary, k)[i]) for k in others)
            groups.setdefault(key, []).append(i)
    names = [None] if len(others) == 1 else [headers[k] for k in others]
    labels = fit_labels(list(groups), names) if others else [""] * len(groups)
    out = []
    for (_, rows), label in zip(groups.items(), labels, strict=True):
        rows.sort(key=lambda i: float(drive[i]) if isinstance(drive[i], (int, float)) else i)
        out.append(
            XYSeries(
                label=label or None,
                xs=tuple(xs[i] for i in rows),
                ys=tuple(ys[i] for i in rows),
                point_labels=tuple(f"{label_value(drive[i])}{unit}" for i in rows),
            )
        )
    return out


def _plot(
    summary: pd.DataFrame,
    knobs: Sequence[str],
    driver: str,
    axes: tuple[str, str, str, str],
    title: str,
    unit: str = "",
    window: str = "",
) -> XYPlot:
    x, y, xlabel, ylabel = axes
    series = _series(summary, knobs, driver, x, y, unit)
    if sum(len(s.xs) for s in series) < 2:
        raise PlotSkipped(f"it needs at least two configurations with {x} and {y}")
    all_x = [v for s in series for v in s.xs]
    all_y = [v for s in series for v in s.ys]
    others = [k for k in knobs if k != driver]
    note = f"mean of ok repeats{window}; points labelled with {knob_headers(knobs)[driver]}"
    return XYPlot(
        title=title,
        note=note,
        xlabel=xlabel,
        ylabel=ylabel,
        series=tuple(series),
        log_x=_spans_tenfold(all_x),
        log_y=_spans_tenfold(all_y),
        legend_title=knob_headers(knobs)[others[0]] if len(others) == 1 else None,
    )


def prepare_latency_throughput(summary: pd.DataFrame, knobs: Sequence[str], which: str) -> XYPlot:
    """``which`` (ttft | tpot) p90 against achieved output tokens/s over a rate sweep."""
    if RATE_KNOB not in knobs:
        raise PlotSkipped(f"it needs a rate sweep ({RATE_KNOB} varying)")
    metric, ylabel, title = LATENCY[which]
    toks = headline(summary, TOKS)
    axes = (toks, metric, "achieved throughput (output tokens/s)", ylabel)
    window = short_window(summary)
    note = f" (tokens/s: {window}; latency: every request)" if window else ""
    if which == "ttft":
        origins = ttft_origins(summary)
        if len(origins) > 1:  # never one axis for TTFTs from different origins
            found = ", ".join(origins)
            raise PlotSkipped(f"its rows measure TTFT from different origins ({found})")
        note += f"; TTFT from {origins[0]}" if origins else ""
    return _plot(summary, knobs, RATE_KNOB, axes, f"{title} vs throughput", "/s", note)


def prepare_energy_concurrency(summary: pd.DataFrame, knobs: Sequence[str]) -> XYPlot:
    """J per output token against the mean running batch."""
    driver = next((k for k in LOAD_KNOBS if k in knobs), None)
    if driver is None:
        raise PlotSkipped("no knob that bounds the requests in flight varies")
    axes = (
        headline(summary, CONC),
        headline(summary, JTOK),
        "achieved concurrency (mean running batch)",
        "energy per output token (J/token)",
    )
    unit = "/s" if driver == RATE_KNOB else ""
    window = short_window(summary)
    note = f" ({window})" if window else ""
    title = "Energy per output token vs concurrency"
    return _plot(summary, knobs, driver, axes, title, unit, note)


# --------------------------------------------------------------------------- drawing


def draw_xy(plot: XYPlot, path: Path | None = None) -> Any:
    """Draw ``plot`` on a new Agg figure (to ``path`` as a PNG, when given); return it."""
    fig = new_figure()
    ax = fig.add_subplot()
    for s in plot.series:
        (line,) = ax.plot(list(s.xs), list(s.ys), marker="o", markersize=5, label=s.label)
        for x, y, text in zip(s.xs, s.ys, s.point_labels, strict=True):
            ax.annotate(
                text,
                (x, y),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=7,
                color=line.get_color(),
            )
    for scale, axis, name in ((plot.log_x, ax.xaxis, "x"), (plot.log_y, ax.yaxis, "y")):
        if scale:
            getattr(ax, f"set_{name}scale")("log")
            plain_log_ticks(axis)
    if not plot.log_y:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(plot.xlabel)
    ax.set_ylabel(plot.ylabel)
    titles(fig, ax, plot.title, plot.note)
    if len(plot.series) > 1:
        side_legend(ax, title=plot.legend_title)
    style_axes(ax)
    return save(fig, path)

"""The report's plots: each kind is prepared (a pure step from the results to the numbers and
labels drawn, a frozen dataclass) and then drawn on matplotlib's Agg canvas (no pyplot, no display).

* :mod:`.knob`: ``tokens_per_s_vs_<knob>.png`` and ``j_per_token_vs_<knob>.png`` for every knob
  that varies (run-order settings such as ``sweep.order`` are not knobs); a configuration without
  an ok run is an x at the axis.
* :mod:`.pareto`: ``pareto.png``, tokens/s against J/token with the front labelled.
* :mod:`.timeline`: ``timeline.png`` for a report over a single run, titled by what it draws.
* :mod:`.serving`: ``ttft_p90_vs_throughput.png`` and ``tpot_p90_vs_throughput.png`` over a rate
  sweep, ``j_per_token_vs_concurrency.png`` where runs recorded the concurrency that ran.
* :mod:`.search`: ``search_trials.png`` where the directory holds a search (``search.json``): the
  objective against the trial number, infeasible trials marked, the best feasible so far.
* :mod:`.quality`: ``quality_pareto.png`` where runs scored their answers (result schema 6):
  accuracy against J per correct answer, the front (accuracy up, energy down) labelled.
* :mod:`.footprint`: ``carbon_pareto.png`` and ``cost_pareto.png`` where runs have carbon or
  cost figures (``docs/footprint.md``): against accuracy where runs scored, else median latency;
  a configuration from a modelled layer hollow and off the front.
* :mod:`.attribution`: ``request_energy_vs_output.png`` and ``request_energy_vs_input.png`` where
  runs recorded each request's energy (requests.jsonl), one colour per configuration.
* :mod:`.phase_energy`: ``phase_energy.png`` where the runs pair 1 new token with N
  (``llem.report.phase_difference``): each phase's J per token by difference and by the fitted
  split, with their intervals.

Where some run has a steady state, tokens/s, J/token and concurrency are each configuration's
headline figures (``llem.report.window``) and each plot's note names the window.

Invalid energy (runs whose ``valid`` is false) is drawn hollow, with a legend entry "invalid
energy": by default those runs are left out of the means, and their own mean is a hollow marker
beside the line (the only marker where every run was invalid); with ``--include-invalid`` the mean
that includes them is hollow. When the runs ran on different hardware, each GPU gets its own line.

Plots that cannot be drawn (energy unavailable everywhere, one configuration only, no timeseries)
are skipped and the reason is returned for the caller to log. matplotlib is imported only when a
plot is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llem.measure.timeseries import TIMESERIES_FILE
from llem.report.cells import is_missing
from llem.report.find import as_given
from llem.report.hardware import GPU
from llem.report.labels import gpu_short
from llem.report.load import Runs
from llem.report.phase_difference import PhaseComparison
from llem.report.plots.attribution import RequestEnergyPlot, draw_request_energy, request_plots
from llem.report.plots.axes import left_out_line, plot_axes
from llem.report.plots.common import (
    METRIC_LABELS,
    PlotSkipped,
    floats,
    invalid_points,
    safe_name,
    values,
)
from llem.report.plots.footprint import (
    CARBON_PLOT,
    COST_PLOT,
    asked_footprint,
    footprint_null,
    has_footprint,
    prepare_footprint_pareto,
)
from llem.report.plots.knob import KnobPlot, draw_knob, knob_figure, prepare_knob
from llem.report.plots.pareto import (
    ParetoPlot,
    draw_pareto,
    pareto_figure,
    prepare_pareto,
)
from llem.report.plots.phase_energy import (
    PHASE_PLOT,
    PhaseEnergyPlot,
    draw_phase_energy,
    prepare_phase_energy,
)
from llem.report.plots.quality import QUALITY_PLOT, prepare_quality_pareto
from llem.report.plots.search import SEARCH_PLOT, SearchPlot, draw_search, prepare_search_plot
from llem.report.plots.serving import (
    RATE_KNOB,
    XYPlot,
    draw_xy,
    prepare_energy_concurrency,
    prepare_latency_throughput,
)
from llem.report.plots.timeline import (
    TimelinePlot,
    draw_timeline,
    prepare_timeline,
    read_timeseries,
    timeline_figure,
)
from llem.report.quality_columns import has_quality
from llem.report.search import find_search
from llem.report.window import CONC, JTOK, TOKS, headline

__all__ = [
    "JTOK",
    "TOKS",
    "KnobPlot",
    "ParetoPlot",
    "PlotSet",
    "PlotSkipped",
    "TimelinePlot",
    "draw",
    "draw_all",
    "invalid_points",
    "knob_figure",
    "pareto_figure",
    "prepare_all",
    "timeline_figure",
    "series_with_hardware",
]

OWN_PATTERNS = (
    "tokens_per_s_vs_*.png",
    "j_per_token_vs_*.png",
    "pareto.png",
    "timeline.png",
    "j_per_token_vs_concurrency.png",
    "ttft_p90_vs_throughput.png",
    "tpot_p90_vs_throughput.png",
    "request_energy_vs_*.png",
    PHASE_PLOT,
    SEARCH_PLOT,
    QUALITY_PLOT,
    CARBON_PLOT,
    COST_PLOT,
)

CONCURRENCY_PLOT = "j_per_token_vs_concurrency.png"
Plot = (
    KnobPlot | ParetoPlot | TimelinePlot | XYPlot | RequestEnergyPlot | SearchPlot | PhaseEnergyPlot
)


@dataclass(frozen=True)
class PlotSet:
    """Every plot that applies, prepared: (file name, plot); and the plots skipped, with why."""

    plots: tuple[tuple[str, Plot], ...]
    skipped: tuple[str, ...]


def clear_old_plots(plot_dir: Path) -> None:
    """Remove plots an earlier report wrote here, so none is left over from other knobs."""
    if not plot_dir.is_dir():
        return
    for pattern in OWN_PATTERNS:
        for old in plot_dir.glob(pattern):
            old.unlink()


def energy_unavailable_reason(runs: Runs) -> str:
    reasons = [
        str(v) for v in values(runs.frame, "energy.unavailable_reason") if not is_missing(v) and v
    ]
    if reasons:
        return max(set(reasons), key=reasons.count)
    return "no run has energy figures"


def series_with_hardware(runs: Runs, summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The knobs that split lines, and the summary to plot: when the runs ran on different
    hardware, the GPU (short label) splits lines too, so no line joins two GPUs' figures."""
    series = list(runs.knobs)
    if GPU not in summary.columns:
        return summary, series
    summary = summary.copy()
    summary[GPU] = [gpu_short(str(v)) for v in values(summary, GPU)]
    return summary, [*series, GPU]


class _Collector:
    """Gathers prepared plots, turning PlotSkipped into a skipped line."""

    def __init__(self) -> None:
        self.plots: list[tuple[str, Plot]] = []
        self.skipped: list[str] = []

    def add(self, name: str, prepare: Any, *args: Any) -> None:
        try:
            self.plots.append((name, prepare(*args)))
        except PlotSkipped as exc:
            self.skipped.append(f"{name} skipped: {exc}")


def _single_run(runs: Runs, out: _Collector) -> None:
    frame = runs.frame
    row = dict(zip(frame.columns, frame.astype(object).iloc[0].tolist(), strict=True))
    run_dir = as_given(row["run_dir"], runs.roots)  # its skip reason names it as the user did

    def prepare() -> TimelinePlot:
        return prepare_timeline(read_timeseries(run_dir), row, run_dir / TIMESERIES_FILE)

    out.add("timeline.png", prepare)


def prepare_all(
    runs: Runs, summary: pd.DataFrame, phases: Sequence[PhaseComparison] = ()
) -> PlotSet:
    """Every plot that applies to ``runs`` (with ``summary`` from ``summary_frame``, and the
    phase energy by difference where the runs pair 1 new token with N), prepared.

    Reads nothing but a single run's timeseries.csv; draws nothing.
    """
    out = _Collector()
    toks, jtok = headline(summary, TOKS), headline(summary, JTOK)  # llem.report.window
    hollow = invalid_points(runs, summary, jtok)
    hollow_toks = invalid_points(runs, summary, toks)  # left out of tokens/s too
    has_energy = any(not math.isnan(v) for v in floats(summary, f"{jtok}.mean")) or any(
        v is not None for v in hollow
    )
    no_energy = f"energy is unavailable in every run ({energy_unavailable_reason(runs)})"
    summary, series = series_with_hardware(runs, summary)
    axes, left = plot_axes(runs)  # llem.report.plots.axes: no x axis for a non-knob
    if left:
        out.skipped.append(left_out_line(left))
    for knob in axes:
        for metric in (toks, jtok) if has_energy else (toks,):
            name = f"{METRIC_LABELS[metric][1]}_vs_{safe_name(knob)}.png"
            marks = hollow if metric == jtok else hollow_toks
            out.add(name, prepare_knob, summary, series, knob, metric, marks)
    pareto = len(summary) >= 2  # a Pareto front compares configurations
    if not has_energy:
        # one line for every plot that needs J/token, so the reason is said once
        missing = [w for w, on in (("J/token plots", axes), ("pareto.png", pareto)) if on]
        if missing:
            out.skipped.append(f"{' and '.join(missing)} skipped: {no_energy}")
    elif pareto:
        out.add("pareto.png", prepare_pareto, summary, series, hollow, hollow_toks)
    _serving(runs, summary, series, has_energy, out)
    if len(summary) >= 2:
        _other_fronts(runs, summary, series, out)
    _energy_split(runs, phases, out)
    if runs.n_runs == 1:
        _single_run(runs, out)
    search = find_search(runs)  # llem.report.search: where a directory holds search.json
    if search is not None:
        out.add(SEARCH_PLOT, prepare_search_plot, search)
    return PlotSet(tuple(out.plots), tuple(out.skipped))


def _other_fronts(runs: Runs, summary: pd.DataFrame, series: list[str], out: _Collector) -> None:
    """The Pareto fronts beyond tokens/s and J/token, where the runs have their figures:
    accuracy (``.quality``), carbon and cost (``.footprint``; where an intensity or a price was
    given but no run has the figure, the skip says why)."""
    if has_quality(summary):
        out.add(QUALITY_PLOT, prepare_quality_pareto, summary, series)
    for kind, name in (("carbon", CARBON_PLOT), ("cost", COST_PLOT)):
        if has_footprint(summary, kind):
            out.add(name, prepare_footprint_pareto, summary, series, kind)
        elif asked_footprint(runs.frame, kind):
            out.skipped.append(
                f"{name} skipped: no run has its figure ({footprint_null(runs.frame, kind)})"
            )


def _energy_split(runs: Runs, phases: Sequence[PhaseComparison], out: _Collector) -> None:
    """Where the energy goes: each request's (``.attribution``), and the phases by difference
    beside the fitted split (``.phase_energy``) where the runs pair 1 new token with N."""
    out.plots += request_plots(runs)
    if phases:
        out.add(PHASE_PLOT, prepare_phase_energy, phases)


def _serving(
    runs: Runs, summary: pd.DataFrame, series: list[str], has_energy: bool, out: _Collector
) -> None:
    """The serving plots (``llem.report.plots.serving``) where they apply: latency against
    throughput over a rate sweep; J/token against achieved concurrency where runs recorded it."""
    if RATE_KNOB in runs.knobs:
        for which in ("ttft", "tpot"):
            name = f"{which}_p90_vs_throughput.png"
            out.add(name, prepare_latency_throughput, summary, series, which)
    conc = floats(summary, f"{headline(summary, CONC)}.mean")
    has_concurrency = any(not math.isnan(v) for v in conc)
    if has_concurrency and len(summary) >= 2 and has_energy:
        out.add(CONCURRENCY_PLOT, prepare_energy_concurrency, summary, series)


def draw(plot: Plot, path: Path | None = None) -> Any:
    """Draw a prepared plot of any kind (to ``path`` as a PNG, when given); return the figure."""
    if isinstance(plot, KnobPlot):
        return draw_knob(plot, path)
    if isinstance(plot, ParetoPlot):
        return draw_pareto(plot, path)
    if isinstance(plot, XYPlot):
        return draw_xy(plot, path)
    if isinstance(plot, RequestEnergyPlot):
        return draw_request_energy(plot, path)
    if isinstance(plot, SearchPlot):
        return draw_search(plot, path)
    if isinstance(plot, PhaseEnergyPlot):
        return draw_phase_energy(plot, path)
    return draw_timeline(plot, path)


def draw_all(
    runs: Runs,
    summary: pd.DataFrame,
    plot_dir: Path,
    phases: Sequence[PhaseComparison] = (),
) -> tuple[list[Path], list[str]]:
    """Draw every plot that applies; return (files written, reasons for plots skipped).

    ``plot_dir`` is made only when a plot is drawn, and removed when clearing the plots an earlier
    report drew there leaves it empty: a report that draws nothing leaves no empty folder."""
    clear_old_plots(plot_dir)
    prepared = prepare_all(runs, summary, phases)
    written = []
    for name, plot in prepared.plots:
        plot_dir.mkdir(parents=True, exist_ok=True)
        draw(plot, plot_dir / name)
        written.append(plot_dir / name)
    if not written and plot_dir.is_dir() and not any(plot_dir.iterdir()):
        plot_dir.rmdir()
    return written, list(prepared.skipped)

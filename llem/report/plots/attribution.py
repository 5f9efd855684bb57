"""Per-request energy plots: each request's attributed energy (``requests.jsonl``'s ``energy_j``,
``llem.figures.attribution``) against its output length (``request_energy_vs_output.png``) and
against its input length (``request_energy_vs_input.png``), one colour per configuration.

:func:`prepare_request_energy` reads the runs' ``requests.jsonl`` through ``llem.result`` and
returns a :class:`RequestEnergyPlot`; :func:`draw_request_energy` draws it. Runs whose requests
carry no energy (no engine steps, no energy source) are left out; where none has any,
:func:`prepare_request_energy` raises ``PlotSkipped`` with the reason and :func:`request_plots`
(what the report calls) returns no plot: they do not apply, as the rate-sweep plots do not apply
without a rate sweep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llem.report.labels import knob_headers
from llem.report.load import Runs
from llem.report.plots.common import PlotSkipped, fit_labels, label_value, values
from llem.report.plots.style import new_figure, save, side_legend, style_axes, titles
from llem.result import read_requests

PLOTS = {"output": "request_energy_vs_output.png", "input": "request_energy_vs_input.png"}
_AXIS = {"output": "output tokens", "input": "input (prompt) tokens"}


@dataclass(frozen=True)
class RequestSeries:
    label: str | None  # the configuration; None for the only one
    tokens: tuple[int, ...]
    energy_j: tuple[float, ...]


@dataclass(frozen=True)
class RequestEnergyPlot:
    title: str
    note: str
    xlabel: str
    series: tuple[RequestSeries, ...]


def _config_of(runs: Runs) -> list[tuple[str, ...]]:
    """Each run's configuration: its knobs' values."""
    return [
        tuple(label_value(values(runs.frame, k)[i]) for k in runs.knobs) for i in range(runs.n_runs)
    ]


def prepare_request_energy(runs: Runs, against: str) -> RequestEnergyPlot:
    """Each request's energy against its ``against`` (output | input) tokens, one series per
    configuration (the repeats of a configuration pooled)."""
    if against not in PLOTS:
        raise ValueError(f"against={against!r} (allowed: {', '.join(PLOTS)})")
    points: dict[tuple[str, ...], list[tuple[int, float]]] = {}
    dirs = values(runs.frame, "run_dir") if "run_dir" in runs.frame.columns else []
    for config, run_dir in zip(_config_of(runs), dirs, strict=False):
        for r in _records(run_dir):
            if r.energy_j is not None:
                n = r.output_tokens if against == "output" else r.input_tokens
                points.setdefault(config, []).append((n, r.energy_j))
    if not points:
        raise PlotSkipped("no run's requests.jsonl has per-request energy (energy_j)")
    names = [knob_headers(runs.knobs)[k] for k in runs.knobs]
    labels = fit_labels(list(points), names) if runs.knobs else [""] * len(points)
    series = tuple(
        RequestSeries(
            label or None,
            tuple(n for n, _ in pts),
            tuple(e for _, e in pts),
        )
        for pts, label in zip(points.values(), labels, strict=True)
    )
    return RequestEnergyPlot(
        title=f"Energy per request vs {against} length",
        note="each request's share of its steps' energy (requests.jsonl energy_j)",
        xlabel=_AXIS[against],
        series=series,
    )


def request_plots(runs: Runs) -> list[tuple[str, RequestEnergyPlot]]:
    """Both plots, where some run has per-request energy; none (they do not apply) elsewhere."""
    try:
        return [(name, prepare_request_energy(runs, against)) for against, name in PLOTS.items()]
    except PlotSkipped:
        return []


def _records(run_dir: Any) -> Sequence[Any]:
    if not isinstance(run_dir, str) or not (Path(run_dir) / "requests.jsonl").exists():
        return []
    return read_requests(run_dir)


def draw_request_energy(plot: RequestEnergyPlot, path: Path | None = None) -> Any:
    """Draw ``plot`` on a new Agg figure (to ``path`` as a PNG, when given); return it."""
    fig = new_figure()
    ax = fig.add_subplot()
    for s in plot.series:
        ax.scatter(list(s.tokens), list(s.energy_j), s=12, alpha=0.7, label=s.label)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(plot.xlabel)
    ax.set_ylabel("energy per request (J)")
    titles(fig, ax, plot.title, plot.note)
    if len(plot.series) > 1:
        side_legend(ax)
    style_axes(ax)
    return save(fig, path)

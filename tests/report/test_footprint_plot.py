"""``carbon_pareto.png`` and ``cost_pareto.png`` (docs/footprint.md): carbon and money against
accuracy where the runs scored, against median latency where none did, on sweeps whose figures
are planted. The front is the planted non-dominated measured configurations; a configuration
from a modelled layer is drawn hollow and never on it, though its figure would put it there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report import quality_synth as qs
from report import report_synth as synth

from llem.report.plots import draw
from llem.report.plots.footprint import CARBON_PLOT, COST_PLOT, MODELLED_LEGEND

#: (batch size, quantization) -> accuracy, gCO2e per correct answer and its bound, energy and
#: capacity USD per correct answer, the layer's label
SCORED: dict[tuple[int, str], tuple[float, float, float, float, float, str]] = {
    (1, "none"): (0.75, 4.0, 0.2, 0.010, 0.020, "measured"),
    (4, "none"): (0.75, 1.2, 0.1, 0.004, 0.006, "measured"),
    (1, "bnb-4bit"): (0.50, 0.8, 0.05, 0.020, 0.030, "measured"),
    # the least carbon and money of all, but from a modelled layer: never on the front
    (4, "bnb-4bit"): (0.625, 0.5, 0.02, 0.001, 0.002, "modelled"),
}
#: batch size -> median end-to-end latency (ms), gCO2e per 1,000 output tokens
UNSCORED = {1: (100.0, 2.0), 4: (300.0, 1.0), 16: (400.0, 3.0)}


def _footprint(label: str, **figures: float) -> dict[str, Any]:
    return {"layer": "gpu", "layer_label": label, "intensity_g_per_kwh": 400.0, **figures}


def _scored(point: dict[str, Any]) -> dict[str, Any]:
    acc, g, g_bound, energy, capacity, label = SCORED[
        (point["pytorch.batch_size"], point["quantization"])
    ]
    result = qs.quality_result(acc, (acc - 0.1, acc + 0.1), 10.0, 1.0)
    result["footprint"] = _footprint(
        label,
        g_per_correct_answer=g,
        g_per_correct_answer_uncertainty=g_bound,
        energy_usd_per_correct_answer=energy,
        capacity_usd_per_correct_answer=capacity,
    )
    return result


def _unscored(point: dict[str, Any]) -> dict[str, Any]:
    latency, g_1k = UNSCORED[point["pytorch.batch_size"]]
    result = synth.ok_result()
    result["latency"]["e2e_ms"] = {"p50": latency, "p90": latency * 1.2, "p99": latency * 1.5}
    result["footprint"] = _footprint("measured", g_per_1k_output_tokens=g_1k)
    return result


@pytest.fixture
def scored_sweep(tmp_path: Path) -> Path:
    grid = {"pytorch.batch_size": [1, 4], "quantization": ["none", "bnb-4bit"]}
    synth.write_sweep(tmp_path / "scored", grid, _scored)
    return tmp_path / "scored"


def test_carbon_per_correct_answer_against_accuracy_keeps_the_modelled_row_off_the_front(
    scored_sweep: Path,
) -> None:
    plots, skipped = synth.prepared_plots(scored_sweep)
    plot = plots[CARBON_PLOT]
    assert [(p.x, p.y) for p in plot.front] == [(50.0, 0.8), (75.0, 1.2)]
    assert [(p.x, p.y) for p in plot.dominated] == [(75.0, 4.0)]
    assert plot.hollow == ((62.5, 0.5, "dominated"),)
    assert plot.invalid_label == MODELLED_LEGEND
    assert [p.yerr for p in plot.front] == pytest.approx([0.05, 0.1])  # the planted bounds
    ax = draw(plot).axes[0]
    assert MODELLED_LEGEND in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "gCO2e per correct answer" in ax.get_ylabel() and "accuracy" in ax.get_xlabel()
    assert not [s for s in skipped if s.startswith((CARBON_PLOT, COST_PLOT))]


def test_cost_per_correct_answer_is_energy_plus_capacity_cost(scored_sweep: Path) -> None:
    plot = synth.prepared_plots(scored_sweep)[0][COST_PLOT]
    front = [c for p in plot.front for c in (p.x, p.y)]
    assert front == pytest.approx([75.0, 0.010])
    dominated = [c for p in sorted(plot.dominated, key=lambda p: p.x) for c in (p.x, p.y)]
    assert dominated == pytest.approx([50.0, 0.050, 75.0, 0.030])
    assert [c for x, y, _ in plot.hollow for c in (x, y)] == pytest.approx([62.5, 0.003])
    assert "energy_usd_per_correct_answer + capacity_usd_per_correct_answer" in plot.ylabel


def test_without_scores_carbon_is_drawn_against_median_latency_lower_being_better(
    tmp_path: Path,
) -> None:
    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4, 16]}, _unscored)
    plots, skipped = synth.prepared_plots(tmp_path / "s")
    plot = plots[CARBON_PLOT]
    assert [(p.x, p.y) for p in plot.front] == [(100.0, 2.0), (300.0, 1.0)]
    assert [(p.x, p.y) for p in plot.dominated] == [(400.0, 3.0)]
    assert plot.hollow == () and plot.invalid_label is None
    assert "latency" in plot.xlabel and "per 1,000 output tokens" in plot.ylabel
    # no price was given: the cost plot is not drawn, and not said to be skipped either
    assert COST_PLOT not in plots
    assert not [s for s in skipped if s.startswith(COST_PLOT)]


def test_an_intensity_without_measured_energy_says_why_the_carbon_plot_is_missing(
    tmp_path: Path,
) -> None:
    why = "no layer was measured here (planted: no energy source)"

    def make(point: dict[str, Any]) -> dict[str, Any]:
        result = _unscored(point)
        result["footprint"] = _footprint("measured", g_per_1k_output_tokens=None)
        result["footprint"]["g_per_output_token"] = None
        result["null_reasons"]["footprint.g_per_output_token"] = why
        return result

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4]}, make)
    plots, skipped = synth.prepared_plots(tmp_path / "s")
    assert CARBON_PLOT not in plots
    assert f"{CARBON_PLOT} skipped: no run has its figure ({why})" in skipped
    assert not [s for s in skipped if s.startswith(COST_PLOT)]  # no price: nothing to say

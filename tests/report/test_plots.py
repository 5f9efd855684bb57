from __future__ import annotations

import math
from pathlib import Path

import pytest
import report_synth as synth

from llem.report.load import load_runs
from llem.report.plots import (
    JTOK,
    TOKS,
    PlotSkipped,
    draw_all,
    knob_figure,
    pareto_figure,
    pareto_front,
    timeline_figure,
)
from llem.report.stats import summary_frame


def _load(*dirs: Path):
    runs = load_runs(list(dirs))
    return runs, summary_frame(runs)


def test_pareto_front() -> None:
    points = [(10, 1.0), (20, 2.0), (15, 2.5), (20, 1.5), (5, 0.5), (20, 1.5)]
    # (20, 2.0) loses to (20, 1.5); (15, 2.5) to (20, 1.5); the tied pair both stay
    assert pareto_front(points) == [0, 3, 4, 5]


def test_knob_plot_lines_have_gaps_not_zeros(tmp_path: Path) -> None:
    def make(p):
        bs, q = p["pytorch.batch_size"], p["quantization"]
        if (bs, q) == (4, "bnb-4bit"):
            return synth.failed_result()
        return synth.ok_result(tok_s=10.0 * bs, j_tok=1.0 / bs)

    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4, 16], "quantization": ["none", "bnb-4bit"]},
        make,
        repeats=2,
    )
    runs, summary = _load(tmp_path / "s")
    fig = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    lines = {c.get_label(): c.lines[0] for c in ax.containers}  # one errorbar per series
    assert set(lines) == {"none", "bnb-4bit"}
    ys = list(lines["bnb-4bit"].get_ydata())
    assert ys[0] == pytest.approx(10.0) and math.isnan(ys[1]) and ys[2] == pytest.approx(160.0)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16"]
    assert ax.get_xlabel() == "pytorch.batch_size"
    assert ax.get_ylabel() == "throughput (output tokens/s)"
    assert ax.get_legend().get_title().get_text() == "quantization"

    fig = knob_figure(summary, runs.knobs, "quantization", JTOK)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "energy per output token (J/token)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["none", "bnb-4bit"]


def test_pareto_labels_name_the_frontier(tmp_path: Path) -> None:
    tok = {150: 200.0, 200: 230.0, 250: 250.0, 300: 240.0}
    jtk = {150: 0.16, 200: 0.20, 250: 0.24, 300: 0.30}
    synth.write_sweep(
        tmp_path / "s",
        {"power_limit_w": [150, 200, 250, 300]},
        lambda p: synth.ok_result(tok_s=tok[p["power_limit_w"]], j_tok=jtk[p["power_limit_w"]]),
    )
    runs, summary = _load(tmp_path / "s")
    fig = pareto_figure(summary, runs.knobs)
    texts = [t.get_text() for t in fig.axes[0].texts]
    strong = [t.get_text() for t in fig.axes[0].texts if t.get_fontsize() == 8]
    assert strong == ["power_limit_w=150", "power_limit_w=200", "power_limit_w=250"]
    assert "power_limit_w=300" in texts  # dominated, labelled quietly
    assert fig.axes[0].get_xlabel().startswith("throughput (output tokens/s)")


def test_pareto_needs_energy(cpu_sweep: Path) -> None:
    runs, summary = _load(cpu_sweep)
    with pytest.raises(PlotSkipped, match="both tokens/s and J/token"):
        pareto_figure(summary, runs.knobs)


def test_timeline_has_one_line_per_device(tmp_path: Path) -> None:
    run = synth.write_run(
        tmp_path / "r",
        [],
        synth.ok_result(),
        timeseries=synth.timeseries_csv(seconds=4, devices=(0, 1)),
    )
    runs, summary = _load(run)
    row = dict(zip(runs.frame.columns, runs.frame.astype(object).iloc[0].tolist(), strict=True))
    fig = timeline_figure(run, row)
    power, temp = fig.axes
    assert power.get_ylabel() == "power (W)" and temp.get_ylabel() == "temperature (°C)"
    labels = [line.get_label() for line in power.lines]
    assert labels[:2] == ["device 0", "device 1"]
    assert "idle 60.0 W" in labels


def test_cpu_single_run_without_timeseries_draws_nothing(tmp_path: Path) -> None:
    run = synth.write_run(tmp_path / "r", [], synth.ok_result(energy=False))
    runs, summary = _load(run)
    written, skipped = draw_all(runs, summary, tmp_path / "plots")
    assert written == []
    assert any(s.startswith("timeline.png skipped:") and "does not exist" in s for s in skipped)


def test_three_knobs_give_one_line_per_combination(tmp_path: Path) -> None:
    synth.write_sweep(
        tmp_path / "s",
        {
            "pytorch.batch_size": [1, 2],
            "decoder": ["greedy", "creative"],
            "quantization": ["none"],
            "dataset.n_prompts": [8, 16],
        },
        lambda p: synth.ok_result(),
    )
    runs, summary = _load(tmp_path / "s")
    assert runs.knobs == ["pytorch.batch_size", "decoder", "dataset.n_prompts"]
    fig = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS)
    labels = sorted(t.get_text() for t in fig.axes[0].get_legend().get_texts())
    assert labels == [
        "decoder=creative, n_prompts=16",
        "decoder=creative, n_prompts=8",
        "decoder=greedy, n_prompts=16",
        "decoder=greedy, n_prompts=8",
    ]

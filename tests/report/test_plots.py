from __future__ import annotations

import math
from pathlib import Path

import pytest
from report import report_synth as synth

from llem.report.load import load_runs
from llem.report.plots import (
    JTOK,
    TOKS,
    PlotSkipped,
    draw_all,
    invalid_points,
    knob_figure,
    pareto_figure,
    pareto_front,
    timeline_figure,
    with_hardware,
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


def _invalid_sweep(tmp_path: Path) -> Path:
    """bs=1 all valid; bs=4 one invalid repeat (reads low); bs=16 every repeat invalid."""

    def make(p):
        bs, r = p["pytorch.batch_size"], p["repeat"]
        bad = (bs == 4 and r == 1) or bs == 16
        return synth.ok_result(
            tok_s=10.0 * bs, j_tok=(0.1 if bad else 1.0) / bs, valid=not bad, problems=["x"] * bad
        )

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4, 16]}, make, repeats=2)
    return tmp_path / "s"


def _hollow_points(ax) -> list:
    return sorted(
        (float(x), float(y))
        for line in ax.lines
        if line.get_markerfacecolor() == "white"
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    )


def test_invalid_energy_is_drawn_hollow_beside_the_valid_means(tmp_path: Path) -> None:
    runs = load_runs([_invalid_sweep(tmp_path)])
    summary = summary_frame(runs)
    hollow = invalid_points(runs, summary, JTOK)
    assert hollow == [None, pytest.approx(0.025), pytest.approx(0.1 / 16)]
    fig = knob_figure(summary, runs.knobs, "pytorch.batch_size", JTOK, hollow)
    ax = fig.axes[0]
    assert _hollow_points(ax) == [(4.0, pytest.approx(0.025)), (16.0, pytest.approx(0.1 / 16))]
    line = ax.containers[0].lines[0]  # the valid means: bs=16 has none, a gap
    assert list(line.get_ydata()[:2]) == pytest.approx([1.0, 0.25]) and math.isnan(
        line.get_ydata()[2]
    )
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["invalid energy (left out of the means)"]
    assert "hollow: invalid energy" in ax.get_title(loc="left")

    kept = summary_frame(runs, include_invalid=True)
    hollow = invalid_points(runs, kept, JTOK)
    assert hollow == [None, pytest.approx((0.25 + 0.025) / 2), pytest.approx(0.1 / 16)]
    ax = knob_figure(kept, runs.knobs, "pytorch.batch_size", JTOK, hollow).axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["invalid energy (in the means)"]
    # the invalid runs are left out of tokens/s as well, and drawn hollow there too
    hollow_toks = invalid_points(runs, summary, TOKS)
    assert hollow_toks == [None, pytest.approx(40.0), pytest.approx(160.0)]
    ax = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS, hollow_toks).axes[0]
    assert _hollow_points(ax) == [(4.0, pytest.approx(40.0)), (16.0, pytest.approx(160.0))]


def test_pareto_keeps_invalid_points_out_of_the_front(tmp_path: Path) -> None:
    runs = load_runs([_invalid_sweep(tmp_path)])
    summary = summary_frame(runs)
    hollow = invalid_points(runs, summary, JTOK)
    fig = pareto_figure(summary, runs.knobs, hollow, invalid_points(runs, summary, TOKS))
    ax = fig.axes[0]
    # bs=16 (every run invalid) would dominate everything; it is hollow and not on the front
    assert (160.0, pytest.approx(0.1 / 16)) in _hollow_points(ax)
    strong = [t.get_text() for t in ax.texts if t.get_fontsize() == 8]
    assert strong == ["batch_size=4"]
    assert "invalid energy (left out of the means)" in [
        t.get_text() for t in ax.get_legend().get_texts()
    ]


def test_plots_draw_one_line_per_gpu(tmp_path: Path) -> None:
    for name, gpu, jtok in (
        ("a", "NVIDIA A100-SXM4-80GB", 0.7),
        ("b", "NVIDIA H100 80GB HBM3", 0.4),
    ):
        synth.write_sweep(
            tmp_path / name,
            {"pytorch.batch_size": [1, 4]},
            lambda p, gpu=gpu, jtok=jtok: synth.ok_result(
                j_tok=jtok / p["pytorch.batch_size"], gpu_model=gpu
            ),
        )
    runs, summary = _load(tmp_path / "a", tmp_path / "b")
    written, _ = draw_all(runs, summary, tmp_path / "plots")
    assert {p.name for p in written} == {
        "tokens_per_s_vs_pytorch.batch_size.png",
        "j_per_token_vs_pytorch.batch_size.png",
        "pareto.png",
    }
    plot_summary, series = with_hardware(runs, summary)
    assert series == ["pytorch.batch_size", "gpu"]
    ax = knob_figure(plot_summary, series, "pytorch.batch_size", JTOK).axes[0]
    lines = {c.get_label(): list(c.lines[0].get_ydata()) for c in ax.containers}
    assert lines == {
        "A100-SXM4-80GB ×1": pytest.approx([0.7, 0.175]),
        "H100 80GB HBM3 ×1": pytest.approx([0.4, 0.1]),
    }

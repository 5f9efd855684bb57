from __future__ import annotations

import math
from pathlib import Path

import pytest
from report import report_synth as synth

from llem.figures.pareto import pareto_front
from llem.report.load import load_runs
from llem.report.plots import (
    JTOK,
    TOKS,
    PlotSkipped,
    draw_all,
    draw_pareto,
    invalid_points,
    knob_figure,
    pareto_figure,
    prepare_all,
    prepare_knob,
    prepare_pareto,
    series_with_hardware,
    timeline_figure,
)
from llem.report.plots.timeline import draw_timeline, prepare_timeline, read_timeseries
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


@pytest.mark.slow
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
    plot_summary, series = series_with_hardware(runs, summary)
    assert series == ["pytorch.batch_size", "gpu"]
    ax = knob_figure(plot_summary, series, "pytorch.batch_size", JTOK).axes[0]
    lines = {c.get_label(): list(c.lines[0].get_ydata()) for c in ax.containers}
    assert lines == {
        "A100-SXM4-80GB ×1": pytest.approx([0.7, 0.175]),
        "H100 80GB HBM3 ×1": pytest.approx([0.4, 0.1]),
    }


# --------------------------------------------------------------------------- as a reader sees them


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _failed_marks(ax) -> list:
    return [line for line in ax.lines if line.get_marker() == "x"]


def test_a_failed_variant_is_marked_and_named_in_the_legend(tmp_path: Path) -> None:
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4, 16], "quantization": ["none", "bnb-4bit"]},
        lambda p: (
            synth.failed_result()
            if p["quantization"] == "bnb-4bit"
            else synth.ok_result(tok_s=10.0 * p["pytorch.batch_size"])
        ),
    )
    runs, summary = _load(tmp_path / "s")
    ax = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS).axes[0]
    assert _legend(ax) == ["none", "bnb-4bit (failed)", "no ok run (failed)"]
    (marks,) = _failed_marks(ax)  # an x at the bottom of the axes at each batch size
    assert len(marks.get_xdata()) == 3 and set(marks.get_ydata()) == {0.03}
    assert marks.get_color() == ax.containers[1].lines[0].get_color()  # bnb-4bit's colour
    assert "x at the axis: no ok run (failed)" in ax.get_title(loc="left")

    # against the categorical knob: every batch size is an x at bnb-4bit, none at none
    ax = knob_figure(summary, runs.knobs, "quantization", TOKS).axes[0]
    assert [list(m.get_xdata()) for m in _failed_marks(ax)] == [
        pytest.approx([1 + s]) for s in (-0.09, 0.0, 0.09)
    ]
    assert _legend(ax)[-1] == "no ok run (failed)"


def test_a_sweep_without_failures_has_no_x_marks(realistic_sweep: Path) -> None:
    runs, summary = _load(realistic_sweep)
    ax = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS).axes[0]
    assert _failed_marks(ax) == [] and "no ok run" not in " ".join(_legend(ax))


def test_categories_are_not_joined_by_lines(tmp_path: Path) -> None:
    tok = {"greedy": 30.0, "standard": 28.0, "creative": 27.0}
    synth.write_sweep(
        tmp_path / "s",
        {"decoder": list(tok), "pytorch.batch_size": [1, 4]},
        lambda p: synth.ok_result(tok_s=tok[p["decoder"]] * p["pytorch.batch_size"]),
    )
    runs, summary = _load(tmp_path / "s")
    ax = knob_figure(summary, runs.knobs, "decoder", TOKS).axes[0]
    drawn = [c.lines[0] for c in ax.containers]
    assert len(drawn) == 2
    assert all(line.get_linestyle() == "None" and line.get_marker() == "o" for line in drawn)
    # numbers on x are joined up
    ax = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS).axes[0]
    assert all(c.lines[0].get_linestyle() == "-" for c in ax.containers)


def _merged_models(tmp_path: Path) -> list[Path]:
    """Two sweeps of models whose paths differ only at the end; a third with another decoder."""
    base = "/models/meta-llama/Llama-3.1-8B-Instruct-finetuned-run-"
    dirs = []
    for name, decoder, f in (("a", "greedy", 1.0), ("b", "greedy", 1.1), ("a", "creative", 0.9)):
        dirs.append(tmp_path / f"{name}-{decoder}")
        synth.write_sweep(
            dirs[-1],
            {
                "pytorch.batch_size": [1, 4],
                "decoder": [decoder],
                "model.name_or_path": [base + name],
            },
            lambda p, f=f: synth.ok_result(
                tok_s=30.0 * p["pytorch.batch_size"] * f, j_tok=2.0 / p["pytorch.batch_size"] / f
            ),
        )
    return dirs


def test_merged_legends_tell_every_series_apart(tmp_path: Path) -> None:
    runs, summary = _load(*_merged_models(tmp_path))
    ax = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS).axes[0]
    legend = _legend(ax)
    assert len(legend) == 3 and len(set(legend)) == 3
    assert legend[0].splitlines() == [
        "decoder=greedy",
        "name_or_path=Llam…-finetuned-run-a",
    ]
    assert legend[1].endswith("-finetuned-run-b")
    assert all(len(line) <= 34 for text in legend for line in text.splitlines())
    # the Pareto labels too; the front's (three lines, at the right edge) stays on the figure
    fig = pareto_figure(summary, runs.knobs)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == len(set(texts))
    renderer = fig.canvas.get_renderer()
    (front,) = [t for t in fig.axes[0].texts if t.get_fontsize() == 8]
    box = front.get_window_extent(renderer)
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1


def test_the_timeline_is_titled_by_what_it_draws(tmp_path: Path) -> None:
    rows = synth.timeseries_csv(seconds=4).splitlines()
    keep = [i for i, h in enumerate(rows[0].split(",")) if h != "temperature_c"]
    power_only = "\n".join(",".join(r.split(",")[i] for i in keep) for r in rows) + "\n"
    for name, text, title in (
        ("both", synth.timeseries_csv(seconds=4), "Power and temperature"),
        ("power", power_only, "Power"),
    ):
        run = synth.write_run(tmp_path / name, [], synth.ok_result(), timeseries=text)
        runs, _ = _load(run)
        row = dict(zip(runs.frame.columns, runs.frame.astype(object).iloc[0].tolist(), strict=True))
        fig = timeline_figure(run, row)
        assert fig.get_suptitle() == f"{title} — HuggingFaceTB/SmolLM2-135M"
        assert len(fig.axes) == (2 if name == "both" else 1)


def test_the_pareto_subtitle_says_which_points_are_labelled(tmp_path: Path) -> None:
    tok = {150: 200.0, 200: 230.0, 300: 220.0}  # 300 W: slower and dearer than 200 W
    jtk = {150: 0.16, 200: 0.20, 300: 0.30}
    synth.write_sweep(
        tmp_path / "s",
        {"power_limit_w": list(tok)},
        lambda p: synth.ok_result(tok_s=tok[p["power_limit_w"]], j_tok=jtk[p["power_limit_w"]]),
    )
    runs, summary = _load(tmp_path / "s")
    ax = pareto_figure(summary, runs.knobs).axes[0]
    quiet = [t.get_text() for t in ax.texts if t.get_fontsize() == 7]
    assert quiet == ["power_limit_w=300"]  # a dominated point, labelled in grey
    assert "front labelled in black, the others in grey" in ax.get_title(loc="left")


def test_pareto_ci_bars_and_axes_are_cut_at_zero_and_the_note_says_so(tmp_path: Path) -> None:
    """Two repeats far apart: a ±5000 tok/s bar around 500 tok/s ran the axes to -4500 tok/s
    and squeezed the points; the bars stop at 0, the axes start there, the subtitle says so."""
    tok = {0: 100.0, 1: 900.0}
    jtk = {0: 0.1, 1: 1.5}
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 8]},
        lambda p: synth.ok_result(
            tok_s=tok[p["repeat"]] * p["pytorch.batch_size"], j_tok=jtk[p["repeat"]]
        ),
        repeats=2,
    )
    runs, summary = _load(tmp_path / "s")
    plot = prepare_pareto(summary, runs.knobs)
    points = (*plot.front, *plot.dominated)
    assert all(p.xerr > p.x for p in points)  # the CI reaches below zero ...
    assert all(p.xlow == p.x and p.ylow == p.y for p in points)  # ... its bar stops at 0
    assert plot.cut and "95% CI bars cut at 0" in plot.note
    fig = draw_pareto(plot)
    ax = fig.axes[0]
    assert ax.get_xlim()[0] >= 0 and ax.get_ylim()[0] >= 0
    for bars in ax.collections:
        for segment in getattr(bars, "get_segments", lambda: [])():
            assert segment[:, 0].min() >= 0 and segment[:, 1].min() >= 0
    assert "95% CI bars cut at 0" in ax.get_title(loc="left")


def test_a_legend_of_many_long_series_fits_its_figure_and_each_line_is_told_apart(
    tmp_path: Path,
) -> None:
    """16 series of 4-line labels (a merged report): the legend was cut at the figure's edge and
    constrained layout warned that the axes collapsed; the figure now grows to hold it, and
    series past the 10 colours take another marker."""
    import warnings

    grid = {
        "pytorch.batch_size": [1, 4],
        "model.name_or_path": [f"/scratch/u/Llama-3.1-8B-Instruct-finetuned-run-{c}" for c in "ab"],
        "decoder.temperature": [0.0, 0.7],
        "model.dtype": ["float16", "bfloat16"],
        "quantization": ["none", "bnb-4bit"],
    }
    synth.write_sweep(
        tmp_path / "s",
        grid,
        lambda p: synth.ok_result(tok_s=10.0 * p["pytorch.batch_size"] + p["repeat"]),
        repeats=2,
    )
    runs, summary = _load(tmp_path / "s")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # constrained layout's "axes sizes collapsed to zero"
        fig = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS)
        fig.savefig(tmp_path / "plot.png")
    ax = fig.axes[0]
    legend = ax.get_legend()
    texts = [t.get_text() for t in legend.get_texts()]
    assert len(texts) == 16 and all(len(t.splitlines()) == 4 for t in texts)
    renderer = fig.canvas.get_renderer()
    box, frame = legend.get_window_extent(renderer), fig.bbox
    assert box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1
    assert ax.get_position().width > 0.3  # the axes keep their room
    styles = {(c.lines[0].get_color(), c.lines[0].get_marker()) for c in ax.containers}
    assert len(styles) == 16


def test_a_replayed_power_timeline_says_it_was_replayed(tmp_path: Path) -> None:
    """measurement.energy=replay plays a recorded trace as if it were a GPU: the timeline must
    not read as a measurement."""
    body = synth.ok_result()
    body["energy"]["source"] = "replay"
    body["hardware"]["gpu_model"] = "replay:h100_trace.csv"
    run = synth.write_run(
        tmp_path / "r",
        ["measurement.energy=replay", "measurement.replay_trace=/data/h100_trace.csv"],
        body,
        timeseries=synth.timeseries_csv(seconds=4),
    )
    runs, _ = _load(run)
    row = dict(zip(runs.frame.columns, runs.frame.astype(object).iloc[0].tolist(), strict=True))
    plot = prepare_timeline(read_timeseries(run), row, run / "timeseries.csv")
    assert plot.title.startswith("Power and temperature (replayed)")
    assert "power replayed from h100_trace.csv (measurement.energy=replay), not measured" in (
        plot.note
    )
    fig = draw_timeline(plot)
    assert "(replayed)" in fig.get_suptitle()
    assert "not measured" in fig.axes[0].get_title(loc="left")
    measured = dict(row, **{"energy.source": "nvml_counter"})
    plain = prepare_timeline(read_timeseries(run), measured, run / "timeseries.csv")
    assert "(replayed)" not in plain.title and "power replayed" not in plain.note


def test_a_merged_report_plots_no_measurement_setting_that_only_differs_between_sweeps(
    tmp_path: Path,
) -> None:
    """Two sweeps, one on a replayed trace and one measured: 'throughput vs replay_trace' and
    'vs measurement.energy' compared two ways of measuring as if they were knobs. They still
    split the rows; they get no plot, and the report says so. A methodology sweep (a
    measurement setting swept within one sweep) keeps its plot."""
    replayed = {
        "measurement.energy": ["replay"],
        "measurement.replay_trace": ["/data/h100.csv"],
        "pytorch.batch_size": [1, 4],
    }
    synth.write_sweep(tmp_path / "a", replayed, lambda p: synth.ok_result())
    measured = {"measurement.energy": ["auto"], "pytorch.batch_size": [1, 4]}
    synth.write_sweep(tmp_path / "b", measured, lambda p: synth.ok_result(tok_s=150.0))
    runs, summary = _load(tmp_path / "a", tmp_path / "b")
    assert {"measurement.energy", "measurement.replay_trace"} <= set(runs.knobs)
    plots = prepare_all(runs, summary)
    names = [name for name, _ in plots.plots]
    assert "tokens_per_s_vs_pytorch.batch_size.png" in names
    assert not [n for n in names if "measurement" in n]
    assert any(
        s.startswith("no plot against measurement.energy, measurement.replay_trace")
        for s in plots.skipped
    )
    assert len(summary) == 4  # the rows stay apart
    methodology = {"measurement.sample_hz": [10, 50], "pytorch.batch_size": [1, 4]}
    synth.write_sweep(tmp_path / "c", methodology, lambda p: synth.ok_result())
    names = [name for name, _ in prepare_all(*_load(tmp_path / "c")).plots]
    assert "tokens_per_s_vs_measurement.sample_hz.png" in names


def test_a_point_alone_at_its_x_sits_on_its_tick(tmp_path: Path) -> None:
    """Two series share batch 1 and 4 (spread apart there, so neither hides the other); only
    one has batch 8, drawn on its tick, not at ~8.3."""
    synth.write_sweep(
        tmp_path / "a",
        {"pytorch.batch_size": [1, 4, 8], "quantization": ["none"]},
        lambda p: synth.ok_result(tok_s=10.0 * p["pytorch.batch_size"] + p["repeat"]),
        repeats=2,
    )
    synth.write_sweep(
        tmp_path / "b",
        {"pytorch.batch_size": [1, 4], "quantization": ["bnb-4bit"]},
        lambda p: synth.ok_result(tok_s=8.0 * p["pytorch.batch_size"] + p["repeat"]),
        repeats=2,
    )
    runs, summary = _load(tmp_path / "a", tmp_path / "b")
    plot = prepare_knob(summary, runs.knobs, "pytorch.batch_size", TOKS)
    xs = {s.label: s.xs for s in plot.series}
    assert xs["none"][2] == 8.0  # alone at 8
    assert xs["none"][0] != xs["bnb-4bit"][0] and xs["none"][1] != xs["bnb-4bit"][1]
    assert all(abs(a - t) < 1 for a, t in zip(xs["none"], (1, 4, 8), strict=True))
    fig = knob_figure(summary, runs.knobs, "pytorch.batch_size", TOKS)
    lines = {c.get_label(): c.lines[0] for c in fig.axes[0].containers}
    assert list(lines["none"].get_xdata())[2] == 8.0

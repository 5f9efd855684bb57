"""The plots' prepare step, on hand-made summaries: the numbers and labels drawn, no matplotlib."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from llem.report.plots import PlotSkipped, prepare_all
from llem.report.plots.knob import KnobPlot, prepare_knob
from llem.report.plots.pareto import prepare_pareto
from llem.report.plots.timeline import prepare_timeline
from llem.report.window import JTOK, TOKS

NAN = float("nan")


def _summary(**columns: list) -> pd.DataFrame:
    return pd.DataFrame({k.replace("__", "."): v for k, v in columns.items()})


def _knob_summary() -> pd.DataFrame:
    """batch_size 1,4,16 × quantization none,bnb-4bit; (4, bnb-4bit) failed: no figures."""
    return pd.DataFrame(
        {
            "pytorch.batch_size": [1, 1, 4, 4, 16, 16],
            "quantization": ["none", "bnb-4bit"] * 3,
            f"{TOKS}.mean": [10.0, 8.0, 40.0, NAN, 160.0, 120.0],
            f"{TOKS}.ci95_half": [1.0, NAN, 2.0, NAN, 3.0, NAN],
            f"{JTOK}.mean": [1.0, 1.2, 0.25, NAN, 0.0625, 0.08],
            "n_energy_invalid": [0] * 6,
            "n_energy_left_out": [0] * 6,
        }
    )


def test_knob_plot_has_one_series_per_other_knob_value_with_gaps() -> None:
    plot = prepare_knob(
        _knob_summary(), ["pytorch.batch_size", "quantization"], "pytorch.batch_size", TOKS
    )
    assert isinstance(plot, KnobPlot)
    assert plot.title == "Throughput vs batch_size"
    assert plot.xlabel == "pytorch.batch_size" and plot.ylabel == "throughput (output tokens/s)"
    assert [s.label for s in plot.series] == ["none", "bnb-4bit"]
    none, bnb = plot.series
    assert none.ys == (10.0, 40.0, 160.0)
    assert bnb.ys[0] == 8.0 and math.isnan(bnb.ys[1]) and bnb.ys[2] == 120.0  # a gap, not 0
    assert none.errs == (1.0, 2.0, 3.0) and bnb.errs is None  # no CI anywhere: no error bars
    # 1, 4, 16 span 16x: a log2 axis; the two series nudged apart, either side of the value,
    # where both have a point
    assert plot.log_x and plot.numeric and plot.ticks == (1.0, 4.0, 16.0)
    assert plot.tick_labels == ("1", "4", "16")
    assert none.xs[0] < 1.0 < bnb.xs[0] and none.xs[0] * bnb.xs[0] == pytest.approx(1.0)
    assert none.xs[1] == 4.0  # bnb-4bit has nothing drawn at 4: none sits on its tick
    assert plot.legend and plot.legend_title == "quantization" and plot.invalid_label is None
    assert plot.note == "mean of ok repeats, error bars: 95% CI (Student t); log scale"


def test_knob_plot_over_categories() -> None:
    plot = prepare_knob(
        _knob_summary(), ["pytorch.batch_size", "quantization"], "quantization", JTOK
    )
    assert not plot.numeric and not plot.log_x
    assert plot.ticks == (0.0, 1.0) and plot.tick_labels == ("none", "bnb-4bit")
    assert [s.label for s in plot.series] == ["1", "4", "16"]
    assert plot.series[0].xs == pytest.approx((-0.09, 0.91))  # nudged left of each category
    assert plot.series[1].xs == (0.0, 1.0)  # the middle one of three: on the category
    assert plot.log_y  # 0.0625 .. 1.2 spans more than tenfold
    assert "error bars" not in plot.note


def test_one_knob_one_series_and_no_legend() -> None:
    summary = _summary(decoder=["greedy", "creative"], **{f"{TOKS}__mean": [12.5, 11.0]})
    plot = prepare_knob(summary, ["decoder"], "decoder", TOKS)
    assert [s.label for s in plot.series] == [None]
    assert plot.series[0].xs == (0.0, 1.0) and not plot.legend and not plot.log_y


def test_invalid_energy_is_hollow_and_in_the_legend() -> None:
    summary = _knob_summary().iloc[[0, 2, 4]].reset_index(drop=True)
    summary["n_energy_invalid"] = [0, 1, 2]
    summary["n_energy_left_out"] = [0, 1, 2]
    plot = prepare_knob(
        summary, ["pytorch.batch_size"], "pytorch.batch_size", JTOK, [None, 0.02, 0.005]
    )
    (series,) = plot.series
    assert series.hollow == ((4.0, 0.02), (16.0, 0.005))
    assert plot.invalid_label == "invalid energy (left out of the means)"
    assert plot.legend and not plot.legend_series
    assert "hollow: invalid energy" in plot.note


def test_knob_plot_without_the_metric_is_skipped() -> None:
    summary = _summary(decoder=["a", "b"], **{f"{JTOK}__mean": [None, None]})
    with pytest.raises(PlotSkipped, match=f"no configuration has {JTOK}"):
        prepare_knob(summary, ["decoder"], "decoder", JTOK)


def _pareto_summary() -> pd.DataFrame:
    return _summary(
        power_limit_w=[150, 200, 250, 300],
        **{
            f"{TOKS}__mean": [200.0, 230.0, 250.0, 240.0],
            f"{JTOK}__mean": [0.16, 0.20, 0.24, 0.30],
            f"{JTOK}__ci95_half": [0.01, None, None, None],
            "n_energy_left_out": [0, 0, 0, 0],
        },
    )


def test_pareto_front_labels_and_dominated_points() -> None:
    plot = prepare_pareto(_pareto_summary(), ["power_limit_w"])
    assert [(p.x, p.y) for p in plot.front] == [(200.0, 0.16), (230.0, 0.20), (250.0, 0.24)]
    assert plot.front[0].yerr == 0.01 and plot.front[1].yerr == 0.0 and plot.front[0].xerr == 0.0
    assert [(p.x, p.y) for p in plot.dominated] == [(240.0, 0.30)]
    assert [(lab.text, lab.strong) for lab in plot.labels] == [
        ("power_limit_w=150", True),
        ("power_limit_w=200", True),
        ("power_limit_w=250", True),
        ("power_limit_w=300", False),
    ]
    assert not plot.log_x and not plot.log_y and plot.hollow == ()
    # the dominated point is labelled too, in grey: the subtitle says so
    assert plot.note.endswith("front labelled in black, the others in grey where they fit")
    assert plot.invalid_label is None


def test_pareto_with_many_points_labels_the_front_only_and_says_so() -> None:
    limits = list(range(100, 340, 20))  # 12 configurations: more than LABEL_ALL_UP_TO
    summary = _summary(
        power_limit_w=limits,
        **{
            f"{TOKS}__mean": [100.0 + w / 10 for w in limits],
            f"{JTOK}__mean": [0.1 + (w % 40) / 100 for w in limits],
            "n_energy_left_out": [0] * len(limits),
        },
    )
    plot = prepare_pareto(summary, ["power_limit_w"])
    assert plot.dominated and all(label.strong for label in plot.labels)
    assert plot.note.endswith("front points labelled")


def test_pareto_invalid_only_point_is_hollow_and_off_the_front() -> None:
    summary = _pareto_summary()
    summary.loc[3, f"{JTOK}.mean"] = None  # every run of 300 W invalid: its own mean is hollow
    summary["n_energy_left_out"] = [0, 0, 0, 2]
    plot = prepare_pareto(summary, ["power_limit_w"], [None, None, None, 0.01])
    assert plot.hollow == ((240.0, 0.01, "invalid"),)
    assert 240.0 not in [p.x for p in plot.front + plot.dominated]
    assert plot.labels[-1].text == "power_limit_w=300" and not plot.labels[-1].strong
    assert plot.log_y  # 0.01 .. 0.24
    assert plot.invalid_label == "invalid energy (left out of the means)"


def test_pareto_needs_two_configurations() -> None:
    one = _pareto_summary().iloc[:1]
    with pytest.raises(PlotSkipped, match="at least two configurations"):
        prepare_pareto(one, ["power_limit_w"])
    none = _pareto_summary().assign(**{f"{JTOK}.mean": None})
    with pytest.raises(PlotSkipped, match="both tokens/s and a valid J/token"):
        prepare_pareto(none, ["power_limit_w"], [None, 0.1, None, None])


def test_timeline_lines_per_device_and_levels() -> None:
    ts = pd.DataFrame(
        {
            "time_s": [100.0, 100.0, 100.5, 100.5],
            "device": [0, 1, 0, 1],
            "power_w": [60.0, 70.0, 200.0, 210.0],
            "temperature_c": [40.0, 41.0, None, 43.0],
        }
    )
    row = {"model": "tiny", "energy.idle_power_w": 60.0, "energy.avg_power_w": None, "valid": False}
    plot = prepare_timeline(ts, row, Path("/x/outputs/run-1/timeseries.csv"))
    power, temp = plot.panels
    assert power.ylabel == "power (W)" and power.from_zero and not temp.from_zero
    assert [(line.label, line.t, line.values) for line in power.lines] == [
        ("device 0", (0.0, 0.5), (60.0, 200.0)),
        ("device 1", (0.0, 0.5), (70.0, 210.0)),
    ]
    assert [(lv.value, lv.label) for lv in power.levels] == [(60.0, "idle 60.0 W")]
    assert math.isnan(temp.lines[0].values[1]) and temp.levels == ()
    assert plot.title == "Power and temperature — tiny"
    assert plot.note == (
        "outputs/run-1: 4 samples from timeseries.csv; "
        "energy judged invalid (see validity.problems)"
    )


def test_timeline_without_power_or_temperature_is_skipped() -> None:
    ts = pd.DataFrame({"time_s": [0.0, 1.0], "power_w": [None, None]})
    with pytest.raises(PlotSkipped, match="has no power or temperature samples"):
        prepare_timeline(ts, {}, Path("r/timeseries.csv"))


@pytest.mark.slow
def test_preparing_every_plot_needs_no_matplotlib(realistic_sweep: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from llem.report.load import load_runs
        from llem.report.stats import summary_frame
        from llem.report.plots import prepare_all
        runs = load_runs([{str(realistic_sweep)!r}])
        plots = prepare_all(runs, summary_frame(runs))
        print(sorted(name for name, _ in plots.plots), plots.skipped)
        print(sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib"))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    names, modules = out.stdout.strip().splitlines()
    assert names == (
        "['j_per_token_vs_pytorch.batch_size.png', 'j_per_token_vs_quantization.png', "
        "'pareto.png', 'tokens_per_s_vs_pytorch.batch_size.png', "
        "'tokens_per_s_vs_quantization.png'] ()"
    )
    assert modules == "[]"


@pytest.mark.slow
def test_drawing_never_imports_pyplot(realistic_sweep: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from llem.report.load import load_runs
        from llem.report.stats import summary_frame
        from llem.report.plots import draw_all
        runs = load_runs([{str(realistic_sweep)!r}])
        written, _ = draw_all(runs, summary_frame(runs), Path({str(tmp_path)!r}))
        print(len(written), "matplotlib.pyplot" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["5", "False"]
    assert (tmp_path / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_prepare_all_says_why_plots_are_skipped(cpu_sweep: Path) -> None:
    from llem.report.load import load_runs
    from llem.report.stats import summary_frame

    runs = load_runs([cpu_sweep])
    plots = prepare_all(runs, summary_frame(runs))
    assert [name for name, _ in plots.plots] == ["tokens_per_s_vs_decoder.png"]
    assert plots.skipped == (
        "J/token plots and pareto.png skipped: energy is unavailable in every run "
        "(no NVIDIA GPU (device is cpu))",
    )

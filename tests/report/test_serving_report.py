"""The report over serving runs (result schema 3): traffic, concurrency and goodput columns, the
window each headline figure comes from, and the serving plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from report import report_synth as synth

from llem.report.build import build_report
from llem.report.load import load_runs
from llem.report.plots import PlotSkipped, draw, prepare_all
from llem.report.plots.serving import prepare_energy_concurrency, prepare_latency_throughput
from llem.report.stats import summary_frame
from llem.report.table import render_table

RATES = [1, 2, 4, 8]


def _load(*dirs: Path):
    runs = load_runs(list(dirs))
    return runs, summary_frame(runs)


def _rows(text: str, n: int = 4) -> dict[str, list[str]]:
    """The ``n`` table rows by their first cell (the rate)."""
    lines = text.splitlines()
    return {line.split()[0]: line.split() for line in lines[2 : 2 + n]}


@pytest.fixture
def rate_sweep(tmp_path: Path) -> Path:
    synth.write_rate_sweep(tmp_path / "rate")
    return tmp_path / "rate"


def test_serving_columns_come_from_the_steady_state_and_say_so(rate_sweep: Path) -> None:
    runs, summary = _load(rate_sweep)
    text = render_table(runs, summary, width=160)
    header = text.splitlines()[0].split("  ")
    header = [h.strip() for h in header if h.strip()]
    assert header == [
        "rate_per_s",
        "traffic",  # the kind; the rate is the knob column already
        "tok/s",
        "J/tok",
        "J/tok bound",
        "conc",
        "TTFT p50 ms",
        "good",
        "good tok/s",
        "peak MB",
        "status",
    ]
    rows = _rows(text)
    # rate 8: steady state 400 × (1 ± noise) tok/s (whole window: 0.95 of it), J/tok 1.8/√8,
    # a running batch of 16 (whole window: 12); half the requests met the SLOs
    assert rows["8"][1] == "poisson"
    assert rows["8"][2:4] == ["397", "±64"]  # not the whole window's 377
    assert rows["8"][4:6] == ["0.636", "±0.000"]  # not the whole window's 0.707
    assert rows["8"][7] == "16.0"
    assert rows["8"][9:11] == ["50%", "198"]
    assert rows["1"][9] == "100%"
    notes = " ".join(text.splitlines()[6:])
    assert "J/tok, tok/s, conc: steady state (after the warm-up requests" in notes
    assert "in every row" in notes
    assert "good = requests meeting every SLO" in notes
    assert "conc = mean running batch (requests between their first and last token)" in notes


def test_the_traffic_column_goes_before_the_plus_minus_and_comes_back_without_it(
    rate_sweep: Path,
) -> None:
    runs, summary = _load(rate_sweep)
    wide = render_table(runs, summary, width=160)
    assert "±" in wide and "traffic" in wide.splitlines()[0]
    narrow = render_table(runs, summary, width=100)
    assert "±" not in narrow
    assert "traffic" in narrow.splitlines()[0]
    assert all(len(line) <= 100 for line in narrow.splitlines())
    narrower = render_table(runs, summary, width=86)
    assert "traffic" not in narrower.splitlines()[0]
    assert all(len(line) <= 86 for line in narrower.splitlines())


def test_summary_has_a_window_per_configuration_and_headline_statistics(rate_sweep: Path) -> None:
    _, summary = _load(rate_sweep)
    assert summary["window"].tolist() == ["steady state"] * 4
    assert summary["window.rule"].tolist() == ["open_loop"] * 4
    assert summary["traffic.kind"].tolist() == ["poisson"] * 4
    head = summary["headline.j_per_output_token.mean"].tolist()
    steady = summary["steady_state.j_per_output_token.mean"].tolist()
    whole = summary["energy.j_per_output_token.mean"].tolist()
    assert head == pytest.approx(steady)
    assert all(h < w for h, w in zip(head, whole, strict=True))
    # the steady state's own bound travels with it (1% of J/tok in the synthetic runs)
    assert summary["headline.j_per_output_token.bound_mean"].tolist() == pytest.approx(
        [0.01 * s for s in steady]
    )
    assert summary["goodput.fraction.mean"].tolist() == [1.0, 1.0, 1.0, 0.5]


def test_a_configuration_missing_a_steady_state_in_one_repeat_uses_the_whole_window(
    tmp_path: Path,
) -> None:
    synth.write_rate_sweep(
        tmp_path / "s", steady=lambda p: (p["traffic.rate_per_s"], p["repeat"]) != (2, 1)
    )
    runs, summary = _load(tmp_path / "s")
    assert summary["window"].tolist() == ["steady state", "whole window"] + ["steady state"] * 2
    row = summary.iloc[1]
    # never a mean over one steady state and one whole window: both repeats' whole windows
    assert row["headline.j_per_output_token.mean"] == row["energy.j_per_output_token.mean"]
    assert row["headline.output_tokens_per_s.mean"] == row["throughput.output_tokens_per_s.mean"]
    assert row["headline.j_per_output_token.n"] == 2
    assert row["headline.concurrency_mean.mean"] == row["concurrency.mean.mean"]
    assert pd.isna(row["window.rule"])
    text = render_table(runs, summary, width=100)
    assert text.splitlines()[0].split()[:4] == ["rate_per_s", "traffic", "window", "tok/s"]
    assert [r[2] for r in _rows(text).values()] == ["steady", "whole", "steady", "steady"]
    notes = " ".join(text.splitlines()[6:])
    assert "steady state (after the warm-up requests, before the cool-down ones) where" in notes
    assert "whole window where a configuration has no steady state in some repeat" in notes


def test_runs_without_a_steady_state_report_the_whole_window_and_say_so(tmp_path: Path) -> None:
    synth.write_rate_sweep(tmp_path / "s", steady=lambda p: p["traffic.rate_per_s"] != 8)
    synth.write_run(
        tmp_path / "s" / "8",
        ["traffic.rate_per_s=16"],
        synth.serving_result(tok_s=300.0, j_tok=0.5, rate=16.0, steady=None),
    )
    runs, summary = _load(tmp_path / "s")
    assert summary["window"].tolist()[-2:] == ["whole window", "whole window"]
    text = render_table(runs, summary, width=100)
    assert _rows(text, 5)["16"][1:5] == ["poisson", "whole", "300", "0.500"]


def test_older_results_get_no_serving_columns_and_no_window_note(realistic_sweep: Path) -> None:
    runs, summary = _load(realistic_sweep)
    for column in ("window", "traffic.kind", "headline.j_per_output_token.mean"):
        assert column not in summary.columns
    assert not any(c.startswith(("goodput.", "concurrency.")) for c in summary.columns)
    text = render_table(runs, summary)
    assert "steady state" not in text and "conc" not in text and "good" not in text


def test_offline_traffic_has_no_traffic_column_but_its_concurrency(tmp_path: Path) -> None:
    synth.write_sweep(
        tmp_path / "b",
        {"vllm.max_num_seqs": [8, 64]},
        lambda p: synth.serving_result(
            kind="offline",
            rate=None,
            concurrency=p["vllm.max_num_seqs"] * 0.8,
            steady={"tok_s": 100.0, "j_tok": 0.5, "conc": p["vllm.max_num_seqs"] * 0.95},
        ),
    )
    runs, summary = _load(tmp_path / "b")
    text = render_table(runs, summary)
    header = text.splitlines()[0].split()
    assert "traffic" not in header and "good" not in header
    assert header[:5] == ["max_num_seqs", "tok/s", "J/tok", "J/tok", "bound"]
    assert [r[4] for r in _rows(text, 2).values()] == ["7.60", "60.8"]  # the steady state's
    assert "steady state (ML.ENERGY v3 rule) in every row" in " ".join(text.splitlines()[4:])


# --------------------------------------------------------------------------- plots


def test_rate_sweep_plots_latency_against_achieved_throughput(rate_sweep: Path) -> None:
    _, summary = _load(rate_sweep)
    plot = prepare_latency_throughput(summary, ["traffic.rate_per_s"], "ttft")
    (series,) = plot.series
    assert series.xs == pytest.approx(summary["headline.output_tokens_per_s.mean"].tolist())
    assert series.ys == pytest.approx([40.0 * r for r in RATES])
    assert series.point_labels == ("1/s", "2/s", "4/s", "8/s")
    assert "tokens/s: steady state" in plot.note
    fig = draw(plot)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "TTFT p90 (ms)"
    assert ax.get_xlabel() == "achieved throughput (output tokens/s)"
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == pytest.approx([40.0, 80.0, 160.0, 320.0])
    assert [t.get_text() for t in ax.texts] == ["1/s", "2/s", "4/s", "8/s"]
    tpot = prepare_latency_throughput(summary, ["traffic.rate_per_s"], "tpot")
    assert tpot.series[0].ys == pytest.approx([10.0 + 5.0 * r for r in RATES])


def test_one_series_per_other_knob(tmp_path: Path) -> None:
    def make(p):
        slow = 2.0 if p["pytorch.batching"] == "static" else 1.0
        return synth.serving_result(
            tok_s=50.0 * p["traffic.rate_per_s"] / slow,
            ttft_p90=30.0 * p["traffic.rate_per_s"] * slow,
            steady={"tok_s": 60.0 * p["traffic.rate_per_s"], "j_tok": 0.5 * slow, "conc": 3.0},
        )

    synth.write_sweep(
        tmp_path / "two",
        {"traffic.rate_per_s": [1, 4], "pytorch.batching": ["continuous", "static"]},
        make,
    )
    runs, summary = _load(tmp_path / "two")
    plot = prepare_latency_throughput(summary, runs.knobs, "ttft")
    assert [s.label for s in plot.series] == ["continuous", "static"]
    assert plot.legend_title == "batching"
    assert plot.series[1].ys == pytest.approx([60.0, 240.0])
    fig = draw(plot)
    assert len(fig.axes[0].get_lines()) == 2
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["continuous", "static"]


def test_energy_against_achieved_concurrency(rate_sweep: Path) -> None:
    runs, summary = _load(rate_sweep)
    plot = prepare_energy_concurrency(summary, runs.knobs)
    (series,) = plot.series
    assert series.xs == pytest.approx([2.0 * r for r in RATES])  # the steady state's
    assert series.ys == pytest.approx(summary["steady_state.j_per_output_token.mean"].tolist())
    assert plot.xlabel == "achieved concurrency (mean running batch)"
    assert "(steady state)" in plot.note
    line = draw(plot).axes[0].get_lines()[0]
    assert list(line.get_xdata()) == pytest.approx([2.0, 4.0, 8.0, 16.0])


@pytest.mark.slow
def test_report_writes_the_serving_plots_and_the_knob_plots_say_their_window(
    rate_sweep: Path,
) -> None:
    report = build_report([rate_sweep])
    names = {p.name for p in report.files}
    assert {
        "ttft_p90_vs_throughput.png",
        "tpot_p90_vs_throughput.png",
        "j_per_token_vs_concurrency.png",
        "j_per_token_vs_traffic.rate_per_s.png",
    } <= names
    plots = dict(prepare_all(report.runs, report.summary).plots)
    knob = plots["j_per_token_vs_traffic.rate_per_s.png"]
    assert "(steady state)" in knob.note
    assert knob.series[0].ys == pytest.approx(
        report.summary["headline.j_per_output_token.mean"].tolist()
    )
    assert "steady state" in plots["pareto.png"].note


def test_invalid_energy_is_marked_at_its_own_steady_state_figure(tmp_path: Path) -> None:
    def make(p):
        rate, bad = p["traffic.rate_per_s"], p["traffic.rate_per_s"] == 4 and p["repeat"] == 0
        j = 3.0 if bad else 1.0
        return synth.serving_result(
            j_tok=j * 2,
            rate=rate,
            valid=False if bad else None,
            steady={"tok_s": 100.0 * rate, "j_tok": j, "conc": rate},
        )

    synth.write_sweep(tmp_path / "v", {"traffic.rate_per_s": [1, 4]}, make, repeats=2)
    runs, summary = _load(tmp_path / "v")
    assert summary["headline.j_per_output_token.mean"].tolist() == [1.0, 1.0]
    plots = dict(prepare_all(runs, summary).plots)
    knob = plots["j_per_token_vs_traffic.rate_per_s.png"]
    assert knob.series[0].hollow == ((4.0, 3.0),)  # the invalid run's steady-state J/tok


def test_no_serving_plots_for_a_batch_sweep_of_older_results(realistic_sweep: Path) -> None:
    runs, summary = _load(realistic_sweep)
    names = [name for name, _ in prepare_all(runs, summary).plots]
    assert not [n for n in names if "throughput" in n or "concurrency" in n]
    with pytest.raises(PlotSkipped, match="rate sweep"):
        prepare_latency_throughput(summary, runs.knobs, "ttft")


def test_static_batches_show_no_running_batch(tmp_path: Path) -> None:
    """A static batch runs the batch size to its end: its running batch over the window (0.34 at
    batch size 1, prefills and gaps in it) reads as a fraction of a request. Its conc cell is
    blank (summary.csv keeps the figure), the note says why; vLLM's offline rows keep theirs."""

    def make(point: dict) -> dict:
        static = point["backend"] == "pytorch"
        body = synth.serving_result(
            kind="offline", rate=None, concurrency=0.34 if static else 7.2, steady=None
        )
        body["validity"]["checks"]["steady_state"] = "not checked" if static else "condition"
        return body

    synth.write_sweep(tmp_path / "s", {"backend": ["pytorch", "vllm"]}, make, repeats=2)
    runs, summary = _load(tmp_path / "s")
    assert summary["static_batches"].tolist() == [True, False]
    text = render_table(runs, summary)
    lines = text.splitlines()
    header = lines[0].split()
    conc = header.index("conc")
    assert lines[2].split()[0] == "pytorch" and "0.340" not in lines[2]
    assert lines[3].split()[0] == "vllm" and "7.20" in lines[3]
    assert conc > 0
    assert "none for static batches" in " ".join(text.split())
    only_static = summary.iloc[:1]
    assert "conc" not in render_table(runs, only_static).splitlines()[0].split()

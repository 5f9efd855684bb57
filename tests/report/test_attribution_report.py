"""The report's view of the energy attribution: the phase split and J per prefill/decode token
columns, and per-request energy against output and input length, one colour per configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report import report_synth as synth

from llem.report.load import load_runs
from llem.report.plots import draw, prepare_all
from llem.report.plots.attribution import prepare_request_energy
from llem.report.stats import summary_frame
from llem.report.table import render_table
from llem.result import RequestRecord, write_requests

SEQS = [8, 64]


def _result(point: dict[str, Any]) -> dict[str, Any]:
    body = synth.serving_result(kind="offline", rate=None)
    seqs = point["vllm.max_num_seqs"]
    prefill, decode, between = (20.0, 70.0, 10.0) if seqs == 8 else (30.0, 65.0, 5.0)
    body["energy"].update(
        prefill_j=prefill,
        decode_j=decode,
        between_steps_j=between,
        j_per_prefill_token=0.004 if seqs == 8 else 0.003,
        j_per_decode_token=0.05 if seqs == 8 else 0.02,
        # each run's 95% interval, and a worst-case bound the table must not show for it
        j_per_prefill_token_ci95_half_width=0.0006 if seqs == 8 else None,
        j_per_decode_token_ci95_half_width=0.02 if seqs == 8 else None,
        j_per_prefill_token_uncertainty=0.0031 if seqs == 8 else 0.001,
        j_per_decode_token_uncertainty=0.031 if seqs == 8 else 0.01,
    )
    return body


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    dirs = synth.write_sweep(tmp_path / "s", {"vllm.max_num_seqs": SEQS}, _result)
    for d, seqs in zip(dirs, SEQS, strict=True):
        per_token = 0.5 if seqs == 8 else 0.2
        write_requests(
            d,
            [
                RequestRecord(
                    i,
                    i,
                    None,
                    0.0,
                    0.1,
                    1.0,
                    100 + 10 * i,
                    10 + i,
                    1.0,
                    1.0,
                    2.0,
                    None,
                    energy_j=per_token * (10 + i),
                    j_per_output_token=per_token,
                    prefill_j=0.1,
                    decode_j=per_token * (10 + i) - 0.1,
                    bound_j=0.5,
                )
                for i in range(5)
            ],
        )
    return tmp_path / "s"


def test_the_table_shows_the_phase_split_and_each_fitted_cost_only_with_its_interval(
    sweep: Path,
) -> None:
    """A fitted J per token is printed with its 95% interval (of the mean of the runs' own; one
    run here), not its worst-case bound, and not at all without an interval (the run at
    max_num_seqs=64 recorded a bound but no interval, as a result from before the interval):
    a bare coefficient looks precise whatever the fit could resolve."""
    runs = load_runs([sweep])
    text = render_table(runs, summary_frame(runs), width=220)
    header = text.splitlines()[0]
    assert "pre/dec/gap %" in header
    assert "J/prefill tok ±95%" in header and "J/decode tok ±95%" in header
    assert "bound" not in header
    lines = {line.split()[0]: line for line in text.splitlines()[2:4]}
    assert "20/70/10" in lines["8"] and "30/65/5" in lines["64"]
    assert "0.00400 ±0.00060" in lines["8"] and "0.0500 ±0.020" in lines["8"]
    assert "0.0031" not in lines["8"] and "0.031" not in lines["8"]
    assert "0.00300" not in lines["64"] and "0.0200" not in lines["64"]
    assert "pre/dec/gap % = the window's energy in prefill, decode and between" in text
    assert "± the 95% interval of the runs' mean (from each run's), shown only with one" in (
        " ".join(text.split())
    )


def test_runs_without_the_attribution_show_no_phase_columns(tmp_path: Path) -> None:
    synth.write_rate_sweep(tmp_path / "rate")
    runs = load_runs([tmp_path / "rate"])
    assert "pre/dec" not in render_table(runs, summary_frame(runs), width=200)
    assert not any("request_energy" in n for n, _ in prepare_all(runs, summary_frame(runs)).plots)


def test_per_request_energy_is_one_series_per_configuration(sweep: Path) -> None:
    runs = load_runs([sweep])
    plot = prepare_request_energy(runs, "output")
    assert plot.xlabel == "output tokens"
    by_label = {s.label: s for s in plot.series}
    assert set(by_label) == {"max_num_seqs=8", "max_num_seqs=64"}
    assert by_label["max_num_seqs=8"].tokens == (10, 11, 12, 13, 14)
    assert by_label["max_num_seqs=64"].energy_j == pytest.approx((2.0, 2.2, 2.4, 2.6, 2.8))
    assert prepare_request_energy(runs, "input").series[0].tokens == (100, 110, 120, 130, 140)


def test_the_drawn_plot_has_a_coloured_scatter_per_configuration(sweep: Path) -> None:
    runs = load_runs([sweep])
    plots = dict(prepare_all(runs, summary_frame(runs)).plots)
    fig = draw(plots["request_energy_vs_output.png"])
    ax = fig.axes[0]
    points = [c.get_offsets().tolist() for c in ax.collections]
    assert len(points) == 2 and len(points[0]) == 5
    colours = {tuple(c.get_facecolor()[0]) for c in ax.collections}
    assert len(colours) == 2
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "max_num_seqs=8",
        "max_num_seqs=64",
    ]
    assert ax.get_ylabel() == "energy per request (J)"

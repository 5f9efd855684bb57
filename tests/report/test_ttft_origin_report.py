"""TTFT's origin is part of what a report column means and of what pools (issue 28, item 7): PyTorch
static batches time TTFT from their own batch of B, vLLM's offline generate from all N prompts
handed over at once; the same engine speed gave 50 ms on one and 395 ms on the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report import report_synth as synth

from llem.report.load import load_runs
from llem.report.plots import PlotSkipped
from llem.report.plots.serving import prepare_latency_throughput
from llem.report.stats import summary_frame
from llem.report.table import render_table

BATCH, ALL = "batch start", "all prompts at once"


def _result(origin: str, ttft_p50: float) -> dict[str, Any]:
    result = synth.ok_result(ttft_p50=ttft_p50)
    result["schema_version"] = 5
    result["latency"]["ttft_origin"] = origin
    return result


def _report(sweep: Path) -> tuple[Any, str]:
    runs = load_runs([sweep])
    summary = summary_frame(runs)
    return summary, render_table(runs, summary, width=140)


def test_two_origins_never_share_an_unmarked_ttft_column(tmp_path: Path) -> None:
    # batch size 8: static batches (TTFT 50 ms); 64: every prompt at once (TTFT 395 ms)
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [8, 64]},
        lambda p: _result(BATCH, 50.0) if p["pytorch.batch_size"] == 8 else _result(ALL, 395.0),
    )
    _, text = _report(tmp_path / "s")
    lines = text.splitlines()
    header = [h.strip() for h in lines[0].split("  ") if h.strip()]
    assert "TTFT p50 ms" not in header  # no column holding both origins
    assert "TTFT p50 ms (batch)" in header and "TTFT p50 ms (all)" in header
    batch_at = lines[0].index("TTFT p50 ms (batch)")
    all_at = lines[0].index("TTFT p50 ms (all)")
    row8, row64 = lines[2], lines[3]
    assert "50.0" in row8[batch_at:all_at] and "395" not in row8
    assert "395" in row64[all_at:] and "50.0" not in row64
    notes = " ".join(lines[4:])
    assert "TTFT (batch) from the start of the request's own batch" in notes
    assert "TTFT (all) from all prompts handed over at once" in notes


def test_one_origin_keeps_one_column_and_names_its_origin(tmp_path: Path) -> None:
    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [8, 64]}, lambda p: _result(ALL, 9.0))
    _, text = _report(tmp_path / "s")
    assert "TTFT p50 ms (" not in text.splitlines()[0] and "TTFT p50 ms" in text.splitlines()[0]
    assert "TTFT from all prompts handed over at once" in " ".join(text.splitlines()[4:])


def test_repeats_with_different_origins_are_not_pooled(tmp_path: Path) -> None:
    # one configuration, its repeats measured from different origins (e.g. results written by
    # two llem versions): two rows, never one mean of 50 and 395 ms
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [8]},
        lambda p: _result(BATCH, 50.0) if p["repeat"] % 2 == 0 else _result(ALL, 395.0),
        repeats=4,
    )
    summary, _ = _report(tmp_path / "s")
    assert sorted(summary["latency.ttft_ms.p50.mean"]) == [50.0, 395.0]  # not one of 222.5
    by_origin = dict(
        zip(summary["latency.ttft_origin"], summary["latency.ttft_ms.p50.mean"], strict=True)
    )
    assert by_origin == {BATCH: 50.0, ALL: 395.0}
    assert list(summary["n"]) == [2, 2]


def test_the_ttft_plot_never_draws_two_origins_on_one_axis(tmp_path: Path) -> None:
    def make(p: dict[str, Any]) -> dict[str, Any]:
        result = synth.serving_result(rate=p["traffic.rate_per_s"])
        result["latency"]["ttft_origin"] = ALL if p["traffic.rate_per_s"] == 8 else "actual send"
        return result

    synth.write_sweep(tmp_path / "r", {"traffic.rate_per_s": [2, 4, 8]}, make)
    summary, _ = _report(tmp_path / "r")
    with pytest.raises(PlotSkipped, match="different origins"):
        prepare_latency_throughput(summary, ["traffic.rate_per_s"], "ttft")
    one = prepare_latency_throughput(summary.iloc[:2], ["traffic.rate_per_s"], "ttft")
    assert "TTFT from actual send" in one.note

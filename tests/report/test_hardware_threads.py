"""The report never pools runs that torch ran on different numbers of CPU threads."""

from __future__ import annotations

from pathlib import Path

from report import report_synth as synth

from llem.report.load import load_runs
from llem.report.notes import render_heading
from llem.report.stats import summary_frame


def _cpu_sweep(sweep: Path, threads: dict[int, int | None], tok_s: dict[int, float]) -> None:
    def make(p):
        result = synth.ok_result(energy=False, tok_s=tok_s[p["repeat"]])
        if threads[p["repeat"]] is not None:
            result["hardware"]["torch_threads"] = threads[p["repeat"]]
            result["hardware"]["torch_interop_threads"] = threads[p["repeat"]]
        return result

    synth.write_sweep(sweep, {"pytorch.batch_size": [1]}, make, repeats=len(threads))


def test_runs_on_two_threads_and_on_one_get_separate_rows(tmp_path: Path) -> None:
    """The joblib case: the same point at 1 thread (18 tok/s) and at 2 (30 tok/s) is two rows,
    each labelled with its threads, never one mean of 24 tok/s."""
    _cpu_sweep(tmp_path / "s", {0: 2, 1: 1, 2: 2}, {0: 30.0, 1: 18.0, 2: 30.0})
    summary = summary_frame(load_runs([tmp_path / "s"]))
    assert summary["gpu"].tolist() == ["cpu · 2 threads", "cpu · 1 thread"]
    assert summary["hardware.torch_threads"].tolist() == ["2", "1"]
    assert summary["n"].tolist() == [2, 1]
    assert summary["throughput.output_tokens_per_s.mean"].tolist() == [30.0, 18.0]


def test_runs_on_the_same_threads_pool_without_a_label(tmp_path: Path) -> None:
    _cpu_sweep(tmp_path / "s", {0: 2, 1: 2}, {0: 30.0, 1: 32.0})
    summary = summary_frame(load_runs([tmp_path / "s"]))
    assert summary["n"].tolist() == [2]
    assert "gpu" not in summary.columns


def test_a_result_from_before_threads_were_recorded_stands_apart(tmp_path: Path) -> None:
    _cpu_sweep(tmp_path / "s", {0: 2, 1: None}, {0: 30.0, 1: 18.0})
    summary = summary_frame(load_runs([tmp_path / "s"]))
    assert summary["gpu"].tolist() == ["cpu · 2 threads", "cpu · threads not recorded"]
    assert summary["n"].tolist() == [1, 1]


def test_an_engine_with_its_own_threads_is_said_so_and_is_the_same_hardware(
    tmp_path: Path,
) -> None:
    """The engines study on one CPU: torch's run on 2 threads beside an engine that runs its own
    threads (null, with the reason): two rows, one labelled as the engine's own threads (not
    "not recorded"), and one kind of hardware."""

    def make(p):
        result = synth.ok_result(energy=False, tok_s={0: 30.0, 1: 80.0}[p["repeat"]])
        if p["repeat"] == 0:
            result["hardware"]["torch_threads"] = 2
            result["hardware"]["torch_interop_threads"] = 2
        else:
            reason = "the vllm engine runs its own threads; llem sets none"
            result["null_reasons"]["hardware.torch_threads"] = reason
            result["null_reasons"]["hardware.torch_interop_threads"] = reason
        return result

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1]}, make, repeats=2)
    runs = load_runs([tmp_path / "s"])
    summary = summary_frame(runs)
    assert summary["gpu"].tolist() == ["cpu · 2 threads", "cpu · the engine's own threads"]
    assert render_heading(runs, summary).endswith("on 1 kind of hardware (2 rows)")

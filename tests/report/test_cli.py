from __future__ import annotations

import csv
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from report import report_synth as synth

from llem.report.__main__ import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    assert len(data) > 15_000, f"{path} is suspiciously small ({len(data)} bytes)"


@pytest.mark.slow
def test_sweep_report_writes_tables_and_plots(realistic_sweep: Path, capsys) -> None:
    assert main([str(realistic_sweep)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("llem report: 18 runs (18 ok), 6 configurations")
    assert "batch_size  quantization      tok/s" in out
    assert max(len(line) for line in out.splitlines()[:12]) <= 100

    results = pd.read_csv(realistic_sweep / "results.csv")
    assert len(results) == 18
    assert results["pytorch.batch_size"].tolist() == [1] * 6 + [4] * 6 + [16] * 6
    # ints stay ints in the CSV text (not 1.0)
    header, first = (realistic_sweep / "results.csv").read_text().splitlines()[:2]
    col = header.split(",").index("pytorch.batch_size")
    assert first.split(",")[col] == "1"

    parquet = pd.read_parquet(realistic_sweep / "results.parquet")
    assert list(parquet.columns) == list(results.columns)
    assert str(parquet["pytorch.batch_size"].dtype) == "Int64"
    assert parquet["throughput.output_tokens_per_s"].tolist() == pytest.approx(
        results["throughput.output_tokens_per_s"].tolist()
    )

    summary = pd.read_csv(realistic_sweep / "summary.csv")
    assert len(summary) == 6
    assert summary["n"].tolist() == [3] * 6
    assert summary["pytorch.batch_size"].tolist() == [1, 1, 4, 4, 16, 16]
    row = summary.iloc[0]
    tok = [30.35, 31.12, 31.53]
    mean = sum(tok) / 3
    sd = math.sqrt(sum((t - mean) ** 2 for t in tok) / 2)
    assert row["throughput.output_tokens_per_s.mean"] == pytest.approx(mean)
    assert row["throughput.output_tokens_per_s.std"] == pytest.approx(sd)
    assert row["throughput.output_tokens_per_s.ci95_half"] == pytest.approx(
        4.302653 * sd / math.sqrt(3), rel=1e-6
    )
    assert "repeat" not in summary.columns

    plots = sorted(p.name for p in (realistic_sweep / "plots").glob("*.png"))
    assert plots == [
        "j_per_token_vs_pytorch.batch_size.png",
        "j_per_token_vs_quantization.png",
        "pareto.png",
        "tokens_per_s_vs_pytorch.batch_size.png",
        "tokens_per_s_vs_quantization.png",
    ]
    for p in (realistic_sweep / "plots").glob("*.png"):
        _assert_png(p)


def test_summary_with_one_run_has_empty_std_and_ci(cpu_sweep: Path) -> None:
    assert main([str(cpu_sweep), "-q"]) == 0
    text = (cpu_sweep / "summary.csv").read_text().splitlines()
    header = text[0].split(",")
    first = dict(zip(header, text[1].split(","), strict=True))
    assert first["n"] == "1"
    assert first["throughput.output_tokens_per_s.mean"] == "12.5"
    assert first["throughput.output_tokens_per_s.std"] == ""
    assert first["throughput.output_tokens_per_s.ci95_half"] == ""
    # no energy on CPU: empty cells, never 0
    assert first["energy.j_per_output_token.mean"] == ""
    with open(cpu_sweep / "results.csv", newline="") as f:
        results = next(csv.DictReader(f))
    assert results["energy.j_per_output_token"] == ""
    assert results["energy.source"] == "unavailable"


def test_cpu_sweep_says_once_under_its_table_why_j_per_token_is_blank(
    cpu_sweep: Path, caplog, capsys
) -> None:
    """The reason is in the report's text (the sweep's own report prints that text too), once
    for the J/tok column and the plots that need it, and not logged a second time."""
    with caplog.at_level(logging.INFO, logger="llem.report"):
        assert main([str(cpu_sweep)]) == 0
    plots = sorted(p.name for p in (cpu_sweep / "plots").glob("*.png"))
    assert plots == ["tokens_per_s_vs_decoder.png"]
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "J/tok is blank and no J/token plot or pareto.png is drawn: no run measured energy "
        "(no NVIDIA GPU (device is cpu))" in out
    )
    assert out.count("no NVIDIA GPU") == 1
    assert "no NVIDIA GPU" not in " ".join(r.getMessage() for r in caplog.records)


def test_single_run_gets_a_timeline(single_run: Path, capsys) -> None:
    assert main([str(single_run)]) == 0
    out = capsys.readouterr().out
    assert "llem report: 1 run (1 ok), 1 configuration" in out
    assert [p.name for p in (single_run / "plots").glob("*.png")] == ["timeline.png"]
    _assert_png(single_run / "plots" / "timeline.png")


CPU_TIMESERIES = "time_s,device,power_w,temperature_c,sm_clock_mhz,mem_clock_mhz\n"


def test_a_cpu_run_report_leaves_no_empty_plots_folder_and_names_paths_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """A CPU run's timeseries.csv holds the header only (no GPU was sampled): nothing is drawn,
    so no plots/ is made, and an earlier report's emptied plots/ goes; every path printed is
    written as the directory was named on the command line, here relative."""
    synth.write_run(
        tmp_path / "runs" / "cpu", [], synth.ok_result(energy=False), timeseries=CPU_TIMESERIES
    )
    synth.write_run(tmp_path / "runs" / "broken", [], synth.failed_result())
    monkeypatch.chdir(tmp_path)
    assert main(["runs/cpu"]) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "runs" / "cpu" / "plots").exists()
    assert "timeline.png skipped: runs/cpu/timeseries.csv has no samples" in out
    assert out.rstrip().endswith("wrote results.csv, results.parquet, summary.csv to runs/cpu")
    assert str(tmp_path) not in out

    (tmp_path / "runs" / "broken" / "plots").mkdir()
    (tmp_path / "runs" / "broken" / "plots" / "timeline.png").write_bytes(PNG_SIGNATURE)
    assert main(["runs/broken"]) == 0
    out = capsys.readouterr().out
    assert "failed: runs/broken — OutOfMemory" in out
    assert str(tmp_path) not in out
    assert not (tmp_path / "runs" / "broken" / "plots").exists()


@pytest.mark.slow
def test_merging_two_sweeps_into_out_dir(tmp_path: Path, capsys) -> None:
    synth.write_sweep(
        tmp_path / "a",
        {"pytorch.batch_size": [1, 4]},
        lambda p: synth.ok_result(tok_s=10.0 * p["pytorch.batch_size"]),
    )
    synth.write_sweep(
        tmp_path / "b",
        {"pytorch.batch_size": [16, 2]},
        lambda p: synth.ok_result(tok_s=10.0 * p["pytorch.batch_size"]),
    )
    out = tmp_path / "merged"
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    results = pd.read_csv(out / "results.csv")
    assert results["pytorch.batch_size"].tolist() == [1, 2, 4, 16]
    assert results["throughput.output_tokens_per_s"].tolist() == [10.0, 20.0, 40.0, 160.0]
    assert {Path(d).parent.name for d in results["run_dir"]} == {"a", "b"}
    assert not (tmp_path / "a" / "results.csv").exists()
    assert (out / "plots" / "tokens_per_s_vs_pytorch.batch_size.png").is_file()
    assert "wrote results.csv, results.parquet, summary.csv" in capsys.readouterr().out


def test_failed_and_skipped_points_appear_everywhere(tmp_path: Path, capsys) -> None:
    synth.write_sweep(
        tmp_path / "s",
        {"pytorch.batch_size": [1, 4, 16]},
        lambda p: {1: synth.ok_result(), 4: synth.failed_result(), 16: synth.skipped_result()}[
            p["pytorch.batch_size"]
        ],
    )
    assert main([str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "(1 ok, 1 failed, 1 skipped)" in out
    assert "failed: pytorch.batch_size=4 — OutOfMemory" in out
    results = pd.read_csv(tmp_path / "s" / "results.csv")
    assert results["status"].tolist() == ["ok", "failed", "skipped"]
    assert results["error.type"].tolist()[1:] == ["OutOfMemory", "ConfigError"]
    summary = pd.read_csv(tmp_path / "s" / "summary.csv")
    assert summary["status"].tolist() == ["ok", "failed", "skipped"]
    assert summary["n"].tolist() == [1, 0, 0]
    assert summary["throughput.output_tokens_per_s.mean"].isna().tolist() == [False, True, True]


def test_no_runs_exits_2_with_one_error_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"error: no runs found in {tmp_path / 'empty'}"
    assert err[1].startswith("hint: ")
    assert main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_replotting_removes_stale_plots(tmp_path: Path) -> None:
    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4]}, lambda p: synth.ok_result())
    stale = tmp_path / "s" / "plots" / "tokens_per_s_vs_decoder.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    mine = tmp_path / "s" / "plots" / "my-notes.png"
    mine.write_bytes(b"keep")
    assert main([str(tmp_path / "s"), "-q"]) == 0
    assert not stale.exists() and mine.exists()


@pytest.mark.slow
def test_module_runs_without_a_display(realistic_sweep: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND", "WAYLAND_DISPLAY")
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "llem.report",
            str(realistic_sweep),
            "--out",
            str(realistic_sweep / "again"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "batch_size  quantization" in proc.stdout
    pngs = list((realistic_sweep / "again" / "plots").glob("*.png"))
    assert len(pngs) == 5
    for p in pngs:
        _assert_png(p)


def test_invalid_runs_are_left_out_unless_asked(tmp_path: Path, capsys) -> None:
    def make(p):
        bad = p["repeat"] == 2
        return synth.ok_result(
            j_tok=0.1 if bad else 0.7,
            valid=not bad,
            problems=["The GPU was throttled (power cap) during the window."] if bad else [],
        )

    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4]}, make, repeats=3)
    assert main([str(tmp_path / "s"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "0.700 ±0.000!" in out
    assert "! 2 runs whose energy was judged invalid: 2 left out of every figure of their" in out
    assert (
        "! pytorch.batch_size=1 repeat=2: The GPU was throttled (power cap) during the window."
        in out
    )
    results = pd.read_csv(tmp_path / "s" / "results.csv")
    assert results["valid"].tolist() == [True, True, False] * 2
    parquet = pd.read_parquet(tmp_path / "s" / "results.parquet")
    assert str(parquet["valid"].dtype) == "boolean"
    summary = pd.read_csv(tmp_path / "s" / "summary.csv")
    assert summary["n_energy_invalid"].tolist() == [1, 1]
    assert summary["n_energy_left_out"].tolist() == [1, 1]
    assert summary["energy.j_per_output_token.mean"].tolist() == pytest.approx([0.7, 0.7])
    assert summary["energy.j_per_output_token.n"].tolist() == [2, 2]
    assert summary["n_used"].tolist() == [2, 2]

    assert main([str(tmp_path / "s"), "--no-plots", "--include-invalid"]) == 0
    assert "kept in (--include-invalid)" in capsys.readouterr().out
    summary = pd.read_csv(tmp_path / "s" / "summary.csv")
    assert summary["n_energy_left_out"].tolist() == [0, 0]
    assert summary["energy.j_per_output_token.mean"].tolist() == pytest.approx([0.5, 0.5])

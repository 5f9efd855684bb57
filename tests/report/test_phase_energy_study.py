"""The phase_energy study end to end on the tiny model: real runs of both lengths, energy from a
replayed constant 100 W (so each run's energy is 100 W x its window, exactly), the report's
section and phase_energy.csv from them."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from llem.app.entrypoint import main

pytestmark = pytest.mark.slow

POWER_W = 100.0


def test_the_study_pairs_its_runs_and_reports_the_difference(
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() rewrites sys.argv
    trace = tmp_path / "trace.csv"
    rows = "\n".join(f"{i * 0.01:.2f},0,{POWER_W}" for i in range(60_000))
    trace.write_text(f"time_s,device,power_w\n{rows}\n")
    sweep = tmp_path / "sweep"
    code = main(
        [
            "--multirun",
            "+experiment=phase_energy",
            "model=hf",
            f"model.name_or_path={tiny_model_dir}",
            "dataset.n_prompts=4",
            "dataset.input_tokens=16",
            "decoder.max_new_tokens=1,6",
            "repeat=range(2)",
            "measurement.warmup=0",
            "measurement.idle_baseline_s=0",
            "measurement.min_window_s=0.3",
            "measurement.min_valid_window_s=0.1",
            "measurement.energy=replay",
            f"measurement.replay_trace={trace}",
            f"hydra.sweep.dir={sweep}",
        ]
    )
    assert code == 0
    per_request: dict[int, list[float]] = {1: [], 6: []}
    for result_file in sweep.glob("*/result.json"):
        result = json.loads(result_file.read_text())
        n = result["config"]["decoder"]["max_new_tokens"]
        assert result["config"]["decoder"]["min_new_tokens"] == n
        work = result["workload"]
        assert work["output_tokens"] == n * work["requests"]  # exactly n new tokens each
        per_request[n].append(POWER_W * result["energy"]["window_s"] / work["requests"])
    # the test's own arithmetic: a constant power's energy is power x window
    mean = {n: sum(v) / len(v) for n, v in per_request.items()}
    decode = (mean[6] - mean[1]) / 5
    with open(sweep / "phase_energy.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["new_tokens"], row["runs_1"], row["runs_n"]) == ("6", "2", "2")
    got = row["difference.j_per_decode_token"]
    if got:  # shown with its interval, or null saying what it would have been
        assert float(got) == pytest.approx(decode, rel=1e-4)
    else:
        assert f"decode J/token {decode:.3g} ±" in row["difference.j_per_decode_token.null_reason"]
    out = capsys.readouterr().out
    assert "phase energy by difference" in out and "J/decode tok diff" in out
    assert (sweep / "plots" / "phase_energy.png").is_file() or "phase_energy.png skipped" in out

"""Acceptance, end to end through ``python -m llem``: a replayed constant trace gives a valid
verdict on a long window and an invalid one, naming the window, on a short one; its uncertainty
bound is far under 5%; a CPU run has no verdict, with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llem.testing import forked_cli

FAST = ["decoder.max_new_tokens=4", "dataset.n_prompts=3", "pytorch.batch_size=2"]


def run_llem(cwd: Path, *args: str) -> dict:
    proc = forked_cli.run_llem(*args, cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(next((cwd / "outputs").rglob("result.json")).read_text())


@pytest.fixture
def constant_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "constant.csv"
    trace.write_text("time_s,device,power_w\n0,GPU-replay-0,150\n3600,GPU-replay-0,150\n")
    return trace


@pytest.mark.parametrize("window", ["long", "short"])
@pytest.mark.slow
def test_replayed_constant_trace_verdict(tmp_path, tiny_model_dir, constant_trace, window):
    min_window_s = "5.0" if window == "long" else "0"  # 5 s is min_valid_window_s's default
    result = run_llem(
        tmp_path,
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        *FAST,
        "measurement.energy=replay",
        f"measurement.replay_trace={constant_trace}",
        "measurement.idle_baseline_s=0.5",
        f"measurement.min_window_s={min_window_s}",
    )
    e, v = result["energy"], result["validity"]
    assert e["source"] == "replay"
    assert e["avg_power_w"] == pytest.approx(150.0, rel=1e-6)
    assert e["total_j_uncertainty"] < 0.05 * e["total_j"]
    assert e["j_per_output_token_uncertainty"] < 0.05 * e["j_per_output_token"]
    tokens = result["workload"]["input_tokens"] + result["workload"]["output_tokens"]
    assert e["j_per_total_token"] == pytest.approx(e["total_j"] / tokens)
    assert e["output_tokens_per_j"] == pytest.approx(
        result["workload"]["output_tokens"] / e["total_j"]
    )
    assert e["idle_source"] == "measured_this_run"
    assert v["checks"]["throttling"] == v["checks"]["other_processes"] == "not checked"
    if window == "long":
        assert e["window_s"] >= 5.0
        assert v["energy_valid"] is True and v["problems"] == []
        assert v["checks"]["window_length"] == "passed"
    else:
        assert e["window_s"] < 5.0
        assert v["energy_valid"] is False
        assert v["checks"]["window_length"] == "failed"
        [problem] = v["problems"]
        assert "The measured window lasted" in problem
        assert "shorter than measurement.min_valid_window_s=5 s" in problem


@pytest.mark.slow
def test_cpu_run_has_no_verdict(tmp_path, tiny_model_dir):
    result = run_llem(
        tmp_path, "model=hf", f"model.name_or_path={tiny_model_dir}", *FAST, "measurement.warmup=0"
    )
    assert result["validity"]["energy_valid"] is None
    assert "device=cpu" in result["null_reasons"]["validity.energy_valid"]

"""The attribution on the step schedules the real PyTorch engines produce: a static batch of 1, a
static batch of 8 (large for the tiny model) and transformers' continuous batching under Poisson
(open-loop) arrivals run on the tiny model; their steps.csv, with its real durations, token
counts and shares, drives the modelled power source (a planted J per prefill token, J per decode
token, static and idle power), attributed on an exact timeline and on NVML's at 10 Hz (readings
per 100 ms window). The attribution recovers the planted figures and each request's planted energy
within its bounds, or is null with the reason where the window is too short for NVML's timeline;
the NVML timeline's bounds are wider (helpers: real_steps.py; vLLM:
vllm_backend/test_vllm_attribution.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attribution.real_steps import (
    COARSE_HZ,
    FINE_HZ,
    MODEL,
    assert_coarse_is_wider,
    assert_recovered,
    attribute_modelled,
    ceiling_w,
    engine_steps,
    planted_request_j,
)
from llem.backends.types import EngineStep
from llem.result import RunResult, read_requests
from llem.runner.attribution import fill_attribution
from llem.testing.cli import run_tiny
from llem.testing.modelled_power import ModelledPower

# Every test reads the real engine runs of the module fixture (about 5 s to make).
pytestmark = pytest.mark.slow

BASE = ("measurement.warmup=0", "decoder.max_new_tokens=8")
STATIC = ("decoder.min_new_tokens=8", "pytorch.batching=static")
CASES = {
    "static batch 1": (*STATIC, "dataset.n_prompts=3", "pytorch.batch_size=1"),
    "static batch 8": (*STATIC, "dataset.n_prompts=8", "pytorch.batch_size=8"),
    "continuous, poisson": (
        "dataset.n_prompts=8",
        "pytorch.batching=continuous",
        "pytorch.batch_size=4",
        "traffic=poisson",
        "traffic.rate_per_s=40",
        "traffic.n_requests=8",
    ),
}


@pytest.fixture(scope="module")
def runs(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each case run once on the real engine: its run directory."""
    out = {}
    for name, overrides in CASES.items():
        run_dir = tmp_path_factory.mktemp(name.replace(" ", "_").replace(",", ""))
        run_tiny(tiny_model_dir, run_dir, *BASE, *overrides)
        out[name] = run_dir
    return out


def _steps(runs: dict[str, Path], case: str) -> list[EngineStep]:
    steps = engine_steps(runs[case])
    assert steps and all(s.shares for s in steps)
    return steps


def test_the_real_schedules_are_what_each_case_claims(runs: dict[str, Path]) -> None:
    """Batch 1 runs one request per step, batch 8 eight, continuous batching a varying batch
    that is joined while others decode (prefill and decode in one step)."""
    one, eight = _steps(runs, "static batch 1"), _steps(runs, "static batch 8")
    assert {s.running for s in one} == {1} and {s.running for s in eight} == {8}
    cb = _steps(runs, "continuous, poisson")
    assert len({s.running for s in cb}) > 1
    assert any(
        s.prefill_tokens and any(x.decode_tokens and not x.prefill_tokens for x in s.shares or ())
        for s in cb
    )


@pytest.mark.parametrize("case", list(CASES))
def test_the_planted_truth_is_the_modelled_sources_energy(runs: dict[str, Path], case: str) -> None:
    """The test's own per-request truth (the planted costs, computed here) adds up to the energy
    the modelled source draws in the steps."""
    steps = _steps(runs, case)
    truth = planted_request_j(steps)
    power = ModelledPower(steps, MODEL)
    drawn = sum(power.energy(s.start_s or s.end_s, s.end_s) for s in steps)
    assert sum(truth.values()) == pytest.approx(drawn, rel=1e-9)


@pytest.mark.parametrize("case", list(CASES))
def test_planted_costs_and_each_requests_energy_are_recovered_on_real_steps(
    runs: dict[str, Path], case: str
) -> None:
    steps = _steps(runs, case)
    fine = assert_recovered(steps, FINE_HZ, fine=True)
    coarse = assert_recovered(steps, COARSE_HZ, fine=False)
    assert_coarse_is_wider(fine, coarse)


def test_the_runs_own_attribution_writes_the_recovered_energy_to_requests_jsonl(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """llem.runner.attribution's fill_attribution, given the modelled window at 1 kHz, writes
    each request's energy and bound into the run's requests.jsonl (matched by the ids in
    steps.csv), within its bound of the planted truth, and the phase split into result.json's
    energy; where the window is too short for the timeline's intervals, every one of them is null
    with the reason."""
    case = "continuous, poisson"
    run_dir = tmp_path / "run"
    shutil.copytree(runs[case], run_dir)
    steps = _steps(runs, case)
    m, got = attribute_modelled(steps, 1000.0)
    result = RunResult.from_json(run_dir / "result.json")
    result.hardware.gpus = [{"power_limit_w": ceiling_w(steps)}]
    fill_attribution(result, m.steps, m.session, run_dir)
    truth = planted_request_j(steps)
    records = read_requests(run_dir)
    assert {r.request_id for r in records} == set(truth)
    if got.requests is None:
        assert all(r.energy_j is None for r in records)
        assert "too coarse" in result.null_reasons["requests.energy_j"]
        assert result.energy.prefill_j is None
        return
    for r in records:
        assert r.energy_j is not None and r.bound_j is not None
        assert abs(r.energy_j - truth[r.request_id]) <= r.bound_j + 1e-6
        assert r.energy_j == pytest.approx(got.requests[r.request_id].energy_j, abs=1e-6)
    energy = result.to_json()["energy"]
    assert energy["prefill_j"] == pytest.approx(got.prefill.energy_j)
    assert energy["decode_j"] == pytest.approx(got.decode.energy_j)

"""The attribution on the step schedules the real PyTorch engines produce: a static batch of 1, a
static batch of 8 (large for the tiny model) and transformers' continuous batching under Poisson
(open-loop) arrivals run on the tiny model; their steps.csv (order, batches, token counts and
shares), its steps lasting as a planted pace says (real_steps.paced), drives the modelled power
source (a planted J per prefill token, J per decode token, static and idle power), attributed on
an exact timeline and on NVML's at 10 Hz (readings per 100 ms window). The attribution recovers
the planted figures and each request's planted energy (exactly on the exact timeline, within its
bounds on NVML's); a window too short for NVML's timeline leaves every request null with the
reason; the NVML timeline's bounds are wider (helpers: real_steps.py; vLLM:
vllm_backend/test_vllm_attribution.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attribution.real_steps import (
    COARSE_HZ,
    COUNTER_UPDATE_S,
    EVEN_PACE,
    FINE_HZ,
    MODEL,
    PACE,
    assert_coarse_is_wider,
    assert_recovered,
    ceiling_w,
    engine_steps,
    pace_rows,
    paced,
    planted_parts_j,
    planted_phases_j,
    planted_request_j,
)
from llem.result import GpuRecord, RunResult, read_requests
from llem.runner.attribution import fill_attribution
from llem.testing.cli import run_tiny
from llem.testing.modelled_power import ModelledPower, measure_modelled
from llem.vocabulary.workload import EngineStep

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
    # continuous batching's steps show the planted pace (a static batch's cannot: real_steps)
    assert pace_rows(sorted(cb, key=lambda s: s.end_s))[0] == PACE
    assert pace_rows(sorted(eight, key=lambda s: s.end_s))[0] == EVEN_PACE


@pytest.mark.parametrize("case", list(CASES))
def test_the_planted_truth_is_the_modelled_sources_energy(runs: dict[str, Path], case: str) -> None:
    """The test's own per-request truth (the planted costs and pace, computed here) adds up to
    the energy the modelled source draws in the paced steps, and their phases to the same."""
    steps = paced(_steps(runs, case))
    truth = planted_request_j(steps)
    assert sum(planted_phases_j(steps)) == pytest.approx(sum(truth.values()), rel=1e-12)
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


def _fill_on_timeline(
    run: Path, tmp_path: Path, span_s: float
) -> tuple[list[EngineStep], RunResult, Path, float]:
    """The run's own fill_attribution on the run's schedule paced to last ``span_s``
    (``paced``), over the modelled window sampled at 1 kHz through NVML's counter (refreshed
    every 100 ms, readings exact): its steps, result, run directory (requests.jsonl rewritten)
    and the window's measured energy (the result of a run without a GPU keeps its own null
    energy.total_j)."""
    run_dir = tmp_path / "run"
    shutil.copytree(run, run_dir)
    steps = engine_steps(run)
    assert steps and all(s.shares for s in steps)
    steps = paced(steps, span_s)
    m = measure_modelled(steps, MODEL, sample_hz=1000.0, counter_update_s=COUNTER_UPDATE_S)
    result = RunResult.from_json(run_dir / "result.json")
    result.hardware.gpus = [GpuRecord(uuid="GPU-0", name="real", power_limit_w=ceiling_w(steps))]
    fill_attribution(result, m.steps, m.session, run_dir)
    window_j = sum(d.energy_j or 0.0 for d in m.window.devices)
    return steps, result, run_dir, window_j


def test_the_runs_own_attribution_writes_the_recovered_energy_to_requests_jsonl(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """llem.runner.attribution's fill_attribution, given the modelled window over the run's
    schedule paced to last 20 s (its own lasts under a second: too few of NVML's 100 ms readings for
    the fit's intervals, where every request's energy is null; the next test), writes each
    request's energy and
    bound into the run's requests.jsonl (matched by the ids in steps.csv), close to and within
    its bound of the planted truth (computed here from the planted costs), and the phase split
    into result.json's energy within its bounds of the planted phases. Nothing here compares the
    attribution with itself, and nothing is skipped: a run whose requests came out null fails."""
    steps, result, run_dir, window_j = _fill_on_timeline(
        runs["continuous, poisson"], tmp_path, 20.0
    )
    truth = planted_request_j(steps)
    records = read_requests(run_dir)
    assert {r.request_id for r in records} == set(truth)
    assert "requests.energy_j" not in result.null_reasons, result.null_reasons.get(
        "requests.energy_j"
    )
    parts = planted_parts_j(steps)
    for r in records:
        assert r.energy_j is not None and r.bound_j is not None, r
        pre, dec = parts[r.request_id]
        assert abs(r.energy_j - (pre + dec)) <= r.bound_j + 1e-9, (r, pre, dec)
        assert r.energy_j == pytest.approx(pre + dec, rel=0.03), (r, pre, dec)
        assert r.prefill_j is not None and r.decode_j is not None
        assert abs(r.prefill_j - pre) <= r.bound_j + 1e-9 and abs(r.decode_j - dec) <= r.bound_j
        assert r.prefill_j + r.decode_j == pytest.approx(r.energy_j)
    energy = result.energy
    assert energy.unattributed_j is not None
    attributed = sum(r.energy_j for r in records if r.energy_j is not None)
    # requests.jsonl keeps each request's joules to 1e-6 J: their sum is within half of that
    # per request of the unrounded attribution (a lost or doubled request is joules off)
    rounding_j = 0.5e-6 * len(records)
    assert attributed + energy.unattributed_j == pytest.approx(window_j, rel=1e-12, abs=rounding_j)
    for name, planted in zip(("prefill_j", "decode_j"), planted_phases_j(steps), strict=True):
        got, bound = getattr(energy, name), getattr(energy, f"{name}_uncertainty")
        assert got is not None and bound is not None, (name, result.null_reasons)
        assert abs(got - planted) <= bound + 1e-9, (name, got, planted, bound)
        assert got == pytest.approx(planted, rel=0.03), (name, got, planted)
    # the fitted J per decode token has a true value here (the source draws the planted model):
    # it lies within its bound of it (its 95 % interval, one draw of the jitter, need not)
    b, bound = energy.j_per_decode_token, energy.j_per_decode_token_uncertainty
    assert b is not None and bound is not None, result.null_reasons
    assert abs(b - MODEL.b_j) <= bound, (b, bound)


def test_a_timeline_too_coarse_for_the_window_leaves_every_request_null_with_the_reason(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """The same run paced to last 0.15 s, less than two of NVML's 100 ms readings: no interval
    of two readings can be cut, so every request's energy and the phase split are null with the
    reason, in requests.jsonl and result.json alike, while the window's energy is measured."""
    steps, result, run_dir, window_j = _fill_on_timeline(
        runs["continuous, poisson"], tmp_path, 0.15
    )
    records = read_requests(run_dir)
    assert {r.request_id for r in records} == set(planted_request_j(steps))
    assert all(r.energy_j is None and r.bound_j is None for r in records)
    assert "too coarse" in result.null_reasons["requests.energy_j"]
    assert window_j > 0
    assert result.energy.prefill_j is None and result.energy.decode_j is None
    assert result.null_reasons.get("energy.prefill_j"), result.null_reasons

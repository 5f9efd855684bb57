"""The attribution filled into a run's result and files (llem.runner.attribution), from a window
measured on the modelled power source."""

from __future__ import annotations

import random

import pytest

from llem.result import (
    GpuRecord,
    RequestRecord,
    RunResult,
    SteadyState,
    read_requests,
    write_requests,
)
from llem.runner.attribution import NO_STEPS, fill_attribution
from llem.testing.modelled_power import PlantedModel, measure_modelled, simulate
from llem.vocabulary.workload import ServeOutput

MODEL = PlantedModel(a_j=0.004, b_j=0.05, static_w=120.0, idle_w=60.0)


def _run(tmp_path):
    rng = random.Random(5)
    n = 12
    arrivals = sorted(rng.uniform(0.0, 0.6) for _ in range(n))
    ins = [rng.randint(32, 400) for _ in range(n)]
    outs = [rng.randint(4, 40) for _ in range(n)]
    m = measure_modelled(simulate(arrivals, ins, outs, 6, seed=5), MODEL, sample_hz=1000.0)
    write_requests(
        tmp_path,
        [
            RequestRecord(i, i, None, 0.0, 0.1, 0.2, ins[i], outs[i], 1.0, 1.0, 2.0, None)
            for i in range(n)
        ],
    )
    served = ServeOutput(m.steps[0].start_s, m.steps[-1].end_s, [], "scheduled send", m.steps)
    result = RunResult(status="ok")
    result.hardware.gpus = [GpuRecord(uuid="GPU-modelled", name="modelled", power_limit_w=700.0)]
    return m, served, result


def test_the_result_gains_the_phase_split_the_fit_and_each_requests_energy(tmp_path) -> None:
    m, served, result = _run(tmp_path)
    w = m.window
    result.steady_state = SteadyState("open_loop", 0.3, 0.7, 0.4, 3, 30, 75.0, 3.0)
    fill_attribution(result, served.steps, m.session, tmp_path)
    e = result.energy
    total = w.devices[0].energy_j
    assert e.prefill_j + e.decode_j + e.between_steps_j == pytest.approx(total, rel=1e-9)
    assert e.prefill_j_uncertainty is not None and e.prefill_j_uncertainty > 0
    assert e.j_per_prefill_token == pytest.approx(MODEL.a_j, rel=0.1)
    assert e.j_per_decode_token == pytest.approx(MODEL.b_j, rel=0.1)
    assert e.fit is not None and e.fit.r2 > 0.99 and e.fit.split == "linear_fit"
    assert e.attribution_method and "least squares" in e.attribution_method
    records = read_requests(tmp_path)
    assert all(r.energy_j is not None and r.bound_j is not None for r in records)
    assert sum(r.energy_j for r in records) + e.unattributed_j == pytest.approx(total, rel=1e-6)
    r0 = records[0]
    assert r0.j_per_output_token == pytest.approx(r0.energy_j / r0.output_tokens, rel=1e-6)
    # 0.4 s of steady state is two intervals of a 100 ms timeline: too few to fit, so its split
    # is null with the reason, not the smoothed steps' split
    s = result.steady_state
    assert s.prefill_j is None and s.decode_j is None and s.between_steps_j is None
    assert "too coarse to read each step's energy" in result.null_reasons["steady_state.prefill_j"]


def test_without_engine_steps_every_attributed_figure_is_null_with_the_reason(tmp_path) -> None:
    m, _, result = _run(tmp_path)
    why = "the engine exposes no per-step record (an engine's own reason)"
    fill_attribution(result, None, m.session, tmp_path, why)
    assert result.energy.prefill_j is None
    assert result.null_reasons["energy.prefill_j"] == why
    assert result.null_reasons["requests.energy_j"] == why
    assert read_requests(tmp_path)[0].energy_j is None
    fill_attribution(result, None, m.session, tmp_path)
    assert result.null_reasons["energy.j_per_decode_token"] == NO_STEPS
    assert result.null_reasons["energy.fit"] == NO_STEPS


def test_requests_whose_prompt_steps_the_engine_did_not_say_get_no_energy(tmp_path) -> None:
    """vLLM's chunks placed by llem's fallback (spread from arrival to first output) are a guess
    at each request's share: the phase split stays, each request's energy is null with the why."""
    from llem.runner.steps import window_steps

    m, served, result = _run(tmp_path)
    served.shares_estimated = "prefill spread evenly (a placement check failed)"
    steps = window_steps(served, [], m.window.start_s, m.window.end_s)
    fill_attribution(result, steps.steps, m.session, tmp_path, steps.clock, steps.shares_estimated)
    assert result.energy.prefill_j is not None
    why = result.null_reasons["requests.energy_j"]
    assert why.startswith("not published") and "a placement check failed" in why
    assert all(r.energy_j is None and r.bound_j is None for r in read_requests(tmp_path))

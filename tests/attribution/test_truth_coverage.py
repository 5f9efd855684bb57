"""Every attribution figure llem publishes (phase split, fitted costs, each request's energy)
against the truth harness's truth (llem.testing.truth: made by the simulated GPU's physics, not by
llem) at the default and a fine sampling rate, on a GPU whose power is not llem's linear model,
read through a sensor that samples only part of each 100 ms window as on A100/H100: each error
within its stated bound; the split's sums exact."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from attribution.truth_runs import DEFAULT_HZ, FINE_HZ, PART_TIME, attribute_run, simulated
from llem.figures.attribution import Attribution
from llem.result import GpuRecord, RunResult, SteadyState
from llem.runner.attribution import fill_attribution
from llem.runner.published import UNRESOLVED
from llem.testing.truth.harness import POWER_LIMIT_W
from llem.vocabulary.workload import EngineStep, StepShare

CASES = [
    (schedule, seed, hz)
    for schedule in ("open loop", "chunked")
    for seed in (1, 2)
    for hz in (DEFAULT_HZ, FINE_HZ)
] + [("open loop", 1, 5.0)]  # slower than the readings: a gap cost fitted below 0


@pytest.mark.parametrize(("schedule", "seed", "hz"), CASES)
@pytest.mark.slow
def test_every_published_figure_is_within_its_bound_of_the_truth(
    schedule: str, seed: int, hz: float
) -> None:
    run, att = simulated(schedule, seed, hz, PART_TIME)
    t = run.truth
    assert att.prefill is not None and att.decode is not None and att.between is not None
    for part, truth in ((att.prefill, t.prefill_j), (att.decode, t.decode_j)):
        assert abs(part.energy_j - truth) <= part.bound_j, (part, truth)
    assert abs(att.between.energy_j - t.between_j) <= att.between.bound_j
    assert att.requests is not None and set(att.requests) == set(t.request_j)
    outside = [
        (rid, r.energy_j, r.bound_j, t.request_j[rid])
        for rid, r in att.requests.items()
        if abs(r.energy_j - t.request_j[rid]) > r.bound_j
    ]
    assert not outside
    window = run.window.devices[0]
    assert window.energy_j is not None
    phases = att.prefill.energy_j + att.decode.energy_j + att.between.energy_j
    assert phases == pytest.approx(window.energy_j, rel=1e-9)
    assert att.unattributed is not None
    attributed = sum(r.energy_j for r in att.requests.values()) + att.unattributed.energy_j
    assert attributed == pytest.approx(window.energy_j, rel=1e-9)


@pytest.mark.parametrize("seed", [1, 2])
def test_chunked_prefill_places_each_chunk_in_its_own_step(seed: int) -> None:
    """Under chunked prefill and preemption, each request's estimated prefill energy spreads
    over the steps that computed its chunks: its prefill tokens as llem saw them are the ones the
    engine computed (recomputes included)."""
    run, att = simulated("chunked", seed, DEFAULT_HZ, PART_TIME)
    assert run.trace.chunked_requests == len(run.truth.request_j)
    assert att.prefill_tokens == run.truth.prefill_tokens
    assert att.requests is not None
    assert all(r.prefill_j > 0 for r in att.requests.values())


def _chunks_in_first_output_step(steps: list[EngineStep]) -> list[EngineStep]:
    """The steps as an engine that (wrongly) reports a request's whole prefill in the step that
    finishes it (its first output token) would: earlier chunks' steps show the request with no
    tokens."""
    seen: dict[int, list[tuple[int, StepShare]]] = {}
    for i, s in enumerate(steps):
        for x in s.shares or ():
            seen.setdefault(x.request_id, []).append((i, x))
    shares = [list(s.shares or ()) for s in steps]
    for rid, seq in seen.items():
        acc = 0
        for j, (i, x) in enumerate(seq):
            if not x.prefill_tokens:
                continue
            acc += x.prefill_tokens
            last = j + 1 == len(seq) or not seq[j + 1][1].prefill_tokens
            shares[i][shares[i].index(x)] = StepShare(rid, acc if last else 0, 0)
            acc = 0 if last else acc
    return [
        EngineStep.of_shares(float(s.start_s or 0.0), s.end_s, sh)
        for s, sh in zip(steps, shares, strict=True)
    ]


def test_chunks_placed_in_the_first_output_step_misattribute_requests() -> None:
    """Why each chunk must sit in the step that computed it: the same run with every chunk moved
    to the step that finishes its prefill gives requests a median error of ~36 % instead of ~6 %,
    and puts some outside their bound."""
    run, right = simulated("chunked", 2, DEFAULT_HZ, PART_TIME)
    wrong = attribute_run(dataclasses.replace(run, steps=_chunks_in_first_output_step(run.steps)))
    truth = run.truth.request_j

    def errors(att: Attribution) -> list[float]:
        assert att.requests is not None
        return [abs(r.energy_j - truth[k]) / truth[k] for k, r in att.requests.items()]

    assert statistics.median(errors(right)) < 0.10
    assert statistics.median(errors(wrong)) > 0.25
    assert wrong.requests is not None
    assert any(abs(r.energy_j - truth[k]) > r.bound_j for k, r in wrong.requests.items())


@pytest.mark.parametrize("hz", [DEFAULT_HZ, FINE_HZ])
@pytest.mark.slow
def test_the_runs_energy_and_steady_state_split_are_within_bound_of_the_truth(
    hz: float, tmp_path: Path
) -> None:
    """What the run writes (llem.runner.attribution.fill_attribution): result.json's energy split
    over the window and steady_state's over its own part of it, against the physics' truth over
    the same spans, and the fitted costs shown only with their bounds."""
    run, _ = simulated("open loop", 1, hz, PART_TIME)
    w = run.window
    result = RunResult(status="ok")
    result.hardware.gpus = [
        GpuRecord(uuid="GPU-simulated", name="simulated", power_limit_w=POWER_LIMIT_W)
    ]
    result.steady_state = SteadyState("open_loop", 1.0, 5.0, 4.0, 40, 1000, 250.0, 8.0)
    fill_attribution(result, run.steps, run.session, tmp_path)
    for section, truth in (
        (result.energy, run.truth),
        (result.steady_state, run.truth_between(w.start_s + 1.0, w.start_s + 5.0)),
    ):
        for name, true_j in (
            ("prefill_j", truth.prefill_j),
            ("decode_j", truth.decode_j),
            ("between_steps_j", truth.between_j),
        ):
            value = getattr(section, name)
            bound = getattr(section, f"{name}_uncertainty")
            where = "energy" if section is result.energy else "steady_state"
            if value is None:  # a 4 s steady state's split can be too wide to publish
                assert where == "steady_state", name
                assert result.null_reasons[f"{where}.{name}"].startswith(UNRESOLVED)
                assert getattr(section, f"{name}_ci95_half_width") is None
                continue
            assert bound is not None, name
            assert abs(value - true_j) <= bound, (name, value, bound, true_j)
            half = getattr(section, f"{name}_ci95_half_width")
            assert half is not None and 2 * half <= abs(value), (name, value, half)
        for name in ("j_per_prefill_token", "j_per_decode_token"):
            if getattr(section, name) is not None:
                assert getattr(section, f"{name}_uncertainty") is not None

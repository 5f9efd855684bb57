"""The truth harness itself (llem.testing.truth): the engine chunks long prompts under its token
budget and preempts with recompute when the KV cache runs out, placing each chunk in the step
that computed it; the physics' truth accounts for every joule the simulated GPU drew; the sensor
reads it as NVML does (readings per 100 ms window from part of the window, a counter that sums
them). No llem figure is used to build any of it."""

from __future__ import annotations

import pytest

from llem.testing.fake_pynvml import Constant
from llem.testing.truth import harness as h
from llem.testing.truth.engine import EngineSpec, Request, run_engine
from llem.testing.truth.gpu import SimulatedGpu
from llem.testing.truth.sensor import Sensed, StepPower


def test_long_prompts_are_prefilled_in_chunks_within_the_token_budget() -> None:
    plan = h.chunked(24, seed=1)
    trace = h.trace_of(plan, SimulatedGpu(), 1)
    budget = plan.spec.max_num_batched_tokens
    assert all((s.prefill_tokens or 0) + (s.decode_tokens or 0) <= budget for s in trace.steps)
    assert trace.chunked_requests == 24
    assert trace.preemptions > 0  # the small KV cache forces recomputes
    prefilled: dict[int, int] = {}
    for s in trace.steps:
        for x in s.shares or ():
            prefilled[x.request_id] = prefilled.get(x.request_id, 0) + x.prefill_tokens
    for r in plan.requests:  # every prompt token, and recomputed ones, in some step's share
        assert prefilled[r.request_id] >= r.prompt_tokens


def test_a_preempted_request_recomputes_its_prompt_and_generated_tokens() -> None:
    spec = EngineSpec(max_num_batched_tokens=64, max_num_seqs=2, kv_blocks=6, block_tokens=16)
    reqs = [Request(0, 0.0, 40, 30), Request(1, 0.0, 40, 30)]
    trace = run_engine(reqs, spec, SimulatedGpu())
    assert trace.preemptions > 0
    decoded = {0: 0, 1: 0}
    prefilled = {0: 0, 1: 0}
    for s in trace.steps:
        for x in s.shares or ():
            decoded[x.request_id] += x.decode_tokens
            prefilled[x.request_id] += x.prefill_tokens
    # each request samples 30 tokens: one per finished prefill, the rest by decode steps
    assert sum(prefilled.values()) > 80  # some prompt (and generated) tokens computed twice
    for rid in (0, 1):
        assert decoded[rid] < 30


def test_the_truth_accounts_for_every_joule_the_gpu_drew() -> None:
    gpu = SimulatedGpu()
    trace = h.trace_of(h.open_loop(24, seed=2), gpu, 2)
    truth = h.truth_of(trace, gpu, 0.0, -0.5, trace.steps[-1].end_s + 0.5)
    drawn = sum(gpu.power_w(w) * gpu.duration_s(w) for w in trace.work)
    assert truth.prefill_j + truth.decode_j == pytest.approx(drawn, rel=1e-9)
    assert sum(truth.request_j.values()) == pytest.approx(drawn, rel=1e-9)
    gaps = truth.window_j - drawn
    idle_s = trace.steps[-1].end_s + 1.0 - sum(s.end_s - (s.start_s or 0) for s in trace.steps)
    assert truth.between_j == pytest.approx(gaps) and gaps == pytest.approx(gpu.idle_w * idle_s)


def test_the_physics_is_not_linear_in_the_tokens() -> None:
    """Doubling a decode batch does not double its tokens' energy above static power."""
    from llem.testing.truth.engine import Work

    gpu = SimulatedGpu()

    def dynamic_j(n: int) -> float:
        work = [Work(i, 0, 1, 500) for i in range(n)]
        return (gpu.power_w(work) - gpu.busy_w) * gpu.duration_s(work)

    assert dynamic_j(32) / dynamic_j(16) < 1.8


def test_the_sensor_sees_only_part_of_each_window_and_the_counter_sums_its_readings() -> None:
    true = StepPower([0.05], [0.07], [500.0], 100.0)  # 20 ms at 500 W in a 100 ms window
    part, full = Sensed(true, 0.1, 0.25), Sensed(true, 0.1, 1.0)
    assert part.power(0.09) == pytest.approx(100.0)  # the step fell outside the 25 ms it saw
    assert full.power(0.09) == pytest.approx(100.0 + 400.0 * 0.2)
    assert full.energy(0.0, 0.1) == pytest.approx(true.energy(0.0, 0.1))
    assert part.energy(0.0, 0.3) == pytest.approx(30.0)  # it missed the step's 8 J
    flat = Sensed(Constant(250.0), 0.1, 0.25)
    assert flat.energy(0.013, 2.47) == pytest.approx(250.0 * (2.47 - 0.013))


def test_every_requests_output_tokens_are_sampled_once_whatever_the_preemptions() -> None:
    """The truth of a J per output token (a steady state's, a search objective's): each request
    samples exactly its output tokens, recomputes included, in steps that the truth counts."""
    plan = h.chunked(24, seed=1)
    gpu = SimulatedGpu()
    trace = h.trace_of(plan, gpu, 1)
    assert trace.preemptions > 0
    truth = h.truth_of(trace, gpu, 0.0, -1.0, trace.steps[-1].end_s + 1.0)
    assert truth.output_tokens == sum(r.output_tokens for r in plan.requests)
    assert truth.j_per_output_token == pytest.approx(truth.window_j / truth.output_tokens)


def test_a_lagging_sensor_reads_the_draw_of_that_much_earlier() -> None:
    """A 20 ms step at 500 W in the first 100 ms window: a sensor 50 ms late shows it in the
    window after (reading [0.05, 0.15] of the draw), and its counter sums the same joules."""
    true = StepPower([0.05], [0.07], [500.0], 100.0)
    prompt, late = Sensed(true, 0.1, 1.0), Sensed(true, 0.1, 1.0, lag_s=0.05)
    assert prompt.power(0.05) == pytest.approx(180.0) and prompt.power(0.15) == 100.0
    assert late.power(0.05) == pytest.approx(100.0) and late.power(0.15) == pytest.approx(180.0)
    assert late.energy(0.0, 0.5) == pytest.approx(true.energy(-0.05, 0.45))


def test_a_jittered_sensor_samples_a_different_part_of_each_window() -> None:
    """Each window's 25 ms sampled part starts anywhere in its first 75 ms (seeded): the same
    step is seen by some windows' readings and missed by others'."""
    true = StepPower([k * 0.1 + 0.05 for k in range(40)], [k * 0.1 + 0.07 for k in range(40)],
                     [500.0] * 40, 100.0)  # fmt: skip
    fixed = Sensed(true, 0.1, 0.25)
    jittered = Sensed(true, 0.1, 0.25, jitter_s=0.075, seed=4)
    assert {round(fixed.reading(k)) for k in range(40)} == {100}  # always misses the step
    seen = [jittered.reading(k) > 100.0 for k in range(40)]
    assert 0 < sum(seen) < 40
    assert Sensed(true, 0.1, 0.25, jitter_s=0.075, seed=4).reading(7) == jittered.reading(7)


def test_a_drifting_baseline_is_in_the_truth_and_its_steps_parts() -> None:
    """The baseline drifting by 15 W: every joule the board drew (steps, drift, idle) is in the
    truth; a step's drift joins its parts, so prefill + decode is the steps' energy with the drift
    drawn while they ran."""
    from llem.testing.truth.gpu import Drift

    gpu, drift = SimulatedGpu(), Drift(15.0, 40.0, 0.3)
    trace = h.trace_of(h.open_loop(24, seed=2), gpu, 2)
    t0, t1 = -0.5, trace.steps[-1].end_s + 0.5
    truth = h.truth_of(trace, gpu, 0.0, t0, t1, drift)
    plain = h.truth_of(trace, gpu, 0.0, t0, t1)
    in_steps = sum(drift.energy_j(float(s.start_s or 0.0), s.end_s) for s in trace.steps)
    assert truth.window_j == pytest.approx(plain.window_j + drift.energy_j(t0, t1))
    assert truth.prefill_j + truth.decode_j == pytest.approx(
        plain.prefill_j + plain.decode_j + in_steps
    )
    assert sum(truth.request_j.values()) == pytest.approx(truth.prefill_j + truth.decode_j)


def test_the_truth_harness_never_imports_the_code_it_checks() -> None:
    """The physics, sensor, engine, harness and variants import nothing of llem's attribution,
    fit, span energies or lag estimate: the truth is the simulator's alone."""
    import ast
    from pathlib import Path

    import llem.testing.truth as truth

    checked = ("llem.figures", "llem.runner", "llem.measure.span_energy")
    for path in Path(truth.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(checked), (path.name, node.module)
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith(checked) for a in node.names), path.name

"""Every engine records its steps: static PyTorch batches and transformers' continuous batching on
the tiny model through a real run (steps.csv), the pieces that turn batches into steps, the
continuous-batching recorder's fallback (vLLM: tests/vllm_backend; steps.csv:
test_steps_file.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from llem.backends.pytorch.cb_steps import StepRecorder
from llem.figures.engine_steps import STATIC_CLOCK, static_steps, steps_from_batches
from llem.result import Concurrency, RunResult, read_requests, read_steps
from llem.runner.steps import fill_engine_steps, running_mean, window_steps
from llem.testing.cli import run_tiny
from llem.vocabulary.workload import BatchOutput, EngineStep, ServeOutput, StepShare

BASE = ("measurement.warmup=0", "decoder.max_new_tokens=5", "dataset.n_prompts=4")


# --------------------------------------------------------------------------- real runs
def _check_run(run_dir: Path, result: dict[str, Any], one_at_a_time: bool = True) -> None:
    """What every engine's steps must satisfy against the run's own counts."""
    steps = read_steps(run_dir)
    requests = read_requests(run_dir)
    assert steps
    # token totals: every prompt token prefilled once (no prefix cache), every output token
    assert sum(s.prefill_tokens or 0 for s in steps) == result["workload"]["input_tokens"]
    assert sum(s.decode_tokens or 0 for s in steps) == result["workload"]["output_tokens"]
    # each request's decode tokens over the steps equal its output tokens, its prefill its input
    decode: dict[int, int] = {}
    prefill: dict[int, int] = {}
    for s in steps:
        assert s.shares is not None and s.running == len(s.shares)
        assert s.prefill_tokens == sum(x.prefill_tokens for x in s.shares)
        for x in s.shares:
            decode[x.request_id] = decode.get(x.request_id, 0) + x.decode_tokens
            prefill[x.request_id] = prefill.get(x.request_id, 0) + x.prefill_tokens
    assert decode == {r.request_id: r.output_tokens for r in requests}
    assert prefill == {r.request_id: r.input_tokens for r in requests}
    # inside the window, ordered, and (one step at a time) not overlapping
    window = result["energy"]["window_s"]
    for s in steps:
        assert s.start_s is not None and 0 <= s.start_s <= s.end_s <= window
        assert s.energy_j is None
    if one_at_a_time:
        for a, b in zip(steps, steps[1:], strict=False):
            assert a.end_s <= b.start_s + 1e-6
    conc = result["concurrency"]
    assert conc["engine_running_max"] == max(s.running for s in steps)
    assert conc["engine_step_clock"]


@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.slow
def test_static_batches_record_a_prefill_step_then_decode_steps(
    tiny_model_dir: Path, tmp_path: Path, batch_size: int
) -> None:
    result = run_tiny(tiny_model_dir, tmp_path, *BASE, f"pytorch.batch_size={batch_size}")
    _check_run(tmp_path, result)
    assert result["concurrency"]["engine_step_clock"] == STATIC_CLOCK
    steps = read_steps(tmp_path)
    batches = 4 // batch_size
    # each batch: one prefill step (every request of the batch prefills in it), then decodes
    prefills = [s for s in steps if s.prefill_tokens]
    assert len(prefills) == batches
    assert all(len(s.shares or ()) == batch_size and s.decode_tokens for s in prefills)
    assert 1 <= result["concurrency"]["engine_running_mean"] <= batch_size


@pytest.mark.parametrize(
    "traffic",
    [
        ["traffic=concurrency", "traffic.max_concurrency=3"],
        ["traffic=poisson", "traffic.rate_per_s=40"],
    ],
)
@pytest.mark.slow
def test_continuous_batching_records_every_step_with_each_requests_share(
    tiny_model_dir: Path, tmp_path: Path, traffic: list[str]
) -> None:
    result = run_tiny(
        tiny_model_dir,
        tmp_path,
        *BASE,
        "pytorch.batching=continuous",
        "pytorch.batch_size=3",
        "traffic.n_requests=8",
        *traffic,
    )
    _check_run(tmp_path, result)
    assert result["concurrency"]["engine_step_clock"].startswith(
        "time.perf_counter in transformers' continuous-batching thread"
    )
    steps = read_steps(tmp_path)
    assert max(s.running for s in steps) <= 3


# ------------------------------------------------------------------- batches into steps
def _batch(**fields: Any) -> BatchOutput:
    base: dict[str, Any] = dict(
        start_s=10.0,
        end_s=10.4,
        input_tokens=[5, 7],
        output_tokens=[3, 1],
        step_times_s=[10.1, 10.2, 10.3],
        step_tokens=[1, 1, 1],
    )
    return BatchOutput(**{**base, **fields})


def test_a_finished_request_leaves_the_static_batchs_steps() -> None:
    steps = static_steps(_batch(), first_id=4)
    assert [(s.start_s, s.end_s) for s in steps] == [(10.0, 10.1), (10.1, 10.2), (10.2, 10.3)]
    assert steps[0].shares == (StepShare(4, 5, 1), StepShare(5, 7, 1))
    assert steps[1].shares == steps[2].shares == (StepShare(4, 0, 1),)
    assert [(s.running, s.prefill_tokens, s.decode_tokens) for s in steps] == [
        (2, 12, 2),
        (1, 0, 1),
        (1, 0, 1),
    ]


def test_prompt_lookup_and_beams_count_what_the_step_computed() -> None:
    lookup = static_steps(
        _batch(output_tokens=[4, 2], step_times_s=[10.1, 10.2], step_tokens=[1, 3])
    )
    assert [x.decode_tokens for s in lookup for x in s.shares or ()] == [1, 1, 3, 1]
    beams = static_steps(_batch(num_beams=2))
    assert beams[0].shares == (StepShare(0, 10, 2), StepShare(1, 14, 2))


def test_batches_number_requests_across_the_run_and_keep_engine_steps() -> None:
    own = [EngineStep(20.5, 1, 3, 1, start_s=20.0, shares=(StepShare(0, 3, 1),))]
    engine = _batch(
        input_tokens=[3],
        output_tokens=[1],
        steps=own,
        step_clock="engine's",
        request_step_times_s=[[20.5]],
        request_step_tokens=[[1]],
    )
    steps, clock = steps_from_batches([_batch(), engine])
    assert steps is not None and steps[-1].shares == (StepShare(2, 3, 1),)
    assert clock == f"{STATIC_CLOCK}; engine's"
    # an engine that schedules its batch itself and does not say how: no steps, and why
    silent = _batch(request_step_times_s=[[10.1], [10.1]], request_step_tokens=[[3], [1]])
    assert steps_from_batches([silent]) == (
        None,
        "the engine exposed no per-step record of its batches",
    )


def test_the_window_keeps_steps_that_end_in_it_and_cuts_their_starts() -> None:
    steps = static_steps(_batch())
    ws = window_steps(None, [_batch()], 10.05, 10.25)
    assert [(s.start_s, s.end_s) for s in ws.steps or []] == [(10.05, 10.1), (10.1, 10.2)]
    assert len(steps) == 3 and ws.clock == STATIC_CLOCK


def test_the_running_batch_is_weighted_by_each_steps_duration() -> None:
    known = [EngineStep(1.0, 4, start_s=0.0), EngineStep(1.5, 2, start_s=1.2)]
    assert running_mean(known) == pytest.approx((4 * 1.0 + 2 * 0.3) / 1.3, abs=1e-4)
    # without starts a step runs from the previous step's end; the first has no duration
    assert running_mean([EngineStep(1.0, 4), EngineStep(1.5, 2)]) == 2.0
    assert running_mean([EngineStep(1.0, 4)]) is None


# ----------------------------------------------------------- continuous-batching recorder
class _Future:
    def __init__(self, state: Any, q: int) -> None:
        self.state, self.query_length, self.has_new_token = state, q, True


def _engine(batches: list[list[_Future]], prompt: int) -> tuple[Any, StepRecorder]:
    """A stand-in manager whose batch processor runs ``batches`` one per step the way
    transformers' does (prepare advances ``position_offset``; update appends a token once the
    prompt is done), with the recorder attached."""
    queue = iter(batches)
    scheduler = SimpleNamespace(schedule_batch=lambda *a: (next(queue), False, 0, 0))
    processor = SimpleNamespace(scheduler=scheduler)

    def prepare() -> bool:
        for f in processor.scheduler.schedule_batch(8, 8)[0]:
            f.state.position_offset += f.query_length
        return True

    def update() -> None:
        for state in {id(f.state): f.state for b in batches for f in b}.values():
            if state.position_offset >= prompt:
                state.generated_tokens.append(7)

    processor.prepare_next_batch, processor.update_batch = prepare, update
    manager = SimpleNamespace(batch_processor=processor)
    rec = StepRecorder.attach(manager)
    assert isinstance(rec, StepRecorder)
    return manager, rec


def _run(manager: Any, n: int) -> None:
    for _ in range(n):
        assert manager.batch_processor.prepare_next_batch() is True
        manager.batch_processor.update_batch()


def test_the_recorder_says_why_when_transformers_lacks_a_step_method() -> None:
    reason = StepRecorder.attach(SimpleNamespace(batch_processor=None))
    assert isinstance(reason, str) and "batch_processor.prepare_next_batch" in reason


def test_the_recorder_follows_a_chunked_prefill_into_decode() -> None:
    """A 5-token prompt in chunks of 3 and 2 (the second produces the first token), then a
    decode step."""
    state = SimpleNamespace(
        request_id="r", initial_tokens=[1] * 5, generated_tokens=[], position_offset=0
    )
    manager, rec = _engine([[_Future(state, 3)], [_Future(state, 2)], [_Future(state, 1)]], 5)
    _run(manager, 3)
    steps = rec.take()
    assert [s.shares for s in steps] == [(("r", 3, 0),), (("r", 2, 1),), (("r", 0, 1),)]
    assert all(a.end_s <= b.start_s for a, b in zip(steps, steps[1:], strict=False))
    assert rec.broken is None


def test_under_async_batching_a_step_starts_where_the_previous_one_ended() -> None:
    """Async batching prepares batch k+1 before updating batch k: each update takes the oldest
    prepared batch, and steps do not overlap."""
    state = SimpleNamespace(
        request_id="r", initial_tokens=[1, 2], generated_tokens=[1], position_offset=2
    )
    manager, rec = _engine([[_Future(state, 1)] for _ in range(3)], 2)
    proc = manager.batch_processor
    for call in ("p", "p", "u", "p", "u", "u"):
        _ = proc.prepare_next_batch() if call == "p" else proc.update_batch()
    steps = rec.take()
    assert [s.shares for s in steps] == [(("r", 0, 1),)] * 3
    assert steps[1].start_s == steps[0].end_s and steps[2].start_s == steps[1].end_s


def test_a_changed_internal_stops_the_recording_never_generation() -> None:
    """Request states without ``initial_tokens``: every step still runs, the recorder says why
    it stopped."""
    state = SimpleNamespace(request_id="r", generated_tokens=[], position_offset=0)
    manager, rec = _engine([[_Future(state, 2)], [_Future(state, 1)]], 2)
    _run(manager, 2)
    assert state.generated_tokens == [7, 7]  # generation went on
    assert rec.take() == []
    assert rec.broken is not None and "initial_tokens" in rec.broken


def test_an_engine_without_steps_says_why_in_the_result(tmp_path: Path) -> None:
    """No steps.csv, the running-batch figures and the clock null with the engine's reason."""
    served = ServeOutput(0.0, 1.0, [], "scheduled send", steps=None, step_clock="no hook here")
    result = RunResult(status="ok", concurrency=Concurrency())
    fill_engine_steps(result, window_steps(served, [], 0.0, 1.0), tmp_path)
    assert result.concurrency is not None and result.concurrency.engine_step_clock is None
    assert result.null_reasons["concurrency.engine_step_clock"] == "no hook here"
    assert result.null_reasons["concurrency.engine_running_mean"] == "no hook here"
    assert not (tmp_path / "steps.csv").exists()


def test_attributed_step_energy_reaches_steps_csv(tmp_path: Path) -> None:
    ws = window_steps(None, [_batch()], 10.0, 10.4)
    result = RunResult(status="ok", concurrency=Concurrency())
    fill_engine_steps(result, ws, tmp_path, energy_j=[1.5, 0.5, None])
    assert [s.energy_j for s in read_steps(tmp_path)] == [1.5, 0.5, None]
    assert read_steps(tmp_path)[0].start_s == 0.0
    with pytest.raises(ValueError, match="2 step energies for 3 steps"):
        fill_engine_steps(result, ws, tmp_path, energy_j=[1.0, 2.0])

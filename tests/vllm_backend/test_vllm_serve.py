"""vLLM serving through the asynchronous engine (``AsyncLLM``): offline, open-loop and closed-loop
workloads on one real engine, warm-up and several ``serve`` calls on it, and a clean shutdown.

The tests marked ``vllm`` start a real engine on the CPU (skipped with the reason where vllm is
not importable); the others check the pieces that need no engine and run everywhere.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from vllm_backend.vllm_helpers import engine_processes, serving_backend

from llem.backends import sections
from llem.backends.vllm import VLLMBackend
from llem.backends.vllm.serve import EngineLoop
from llem.backends.vllm.steps import LoggedStep, engine_step, with_shares
from llem.errors import RunError
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import EngineStep, Prompt, ScheduledRequest, ServeOutput, StepShare

# One pytest-xdist worker runs the whole module: its engine (a module fixture) starts once.
pytestmark = pytest.mark.xdist_group("vllm_serve")

N_TOKENS = 8
MAX_NUM_SEQS = 4


def _prompt(k: int, length: int = 12) -> Prompt:
    return Prompt(token_ids=tuple(range(10 + k, 10 + k + length)))


def _requests(n: int, scheduled: list[float | None] | None = None) -> list[ScheduledRequest]:
    times = scheduled if scheduled is not None else [0.0] * n
    return [ScheduledRequest(i, i % 3, _prompt(i % 3), times[i]) for i in range(n)]


@pytest.fixture(scope="module")
def served(head64_model_dir: Path) -> Iterator[tuple[VLLMBackend, LoadedModel]]:
    """One serving engine for the module, warmed up through the asynchronous engine."""
    backend = serving_backend(
        head64_model_dir,
        f"vllm.max_num_seqs={MAX_NUM_SEQS}",
        f"decoder.max_new_tokens={N_TOKENS}",
        f"decoder.min_new_tokens={N_TOKENS}",
    )
    loaded = backend.load("cpu")
    backend.warm_up(loaded, [[_prompt(0), _prompt(1)]], 1)
    try:
        yield backend, loaded
    finally:
        backend.unload(loaded)


# asyncio wakes a timer up to its clock's resolution (1 ns) early; allow 1 us.
EARLY_S = 1e-6


def _check_timelines(out: ServeOutput, requests: list[ScheduledRequest]) -> None:
    """What every workload shares: exact token counts, chunk times that only go forward, within
    the workload's span, each request sent no earlier than its arrival."""
    assert [t.request_id for t in out.requests] == [r.request_id for r in requests]
    for t, r in zip(out.requests, requests, strict=True):
        assert t.prompt_index == r.prompt_index
        assert t.output_tokens == N_TOKENS  # exact: min_new_tokens = max_new_tokens
        assert t.input_tokens == 12
        assert all(b > a for a, b in zip(t.chunk_times_s, t.chunk_times_s[1:], strict=False))
        assert out.start_s <= t.arrival_s <= t.sent_s + EARLY_S
        assert t.sent_s < t.chunk_times_s[0]
        assert t.cached_input_tokens == 0  # prefix caching is off by default
    assert out.end_s == max(t.chunk_times_s[-1] for t in out.requests)


@pytest.mark.vllm
def test_offline_workload_sends_everything_at_the_origin(
    served: tuple[VLLMBackend, LoadedModel],
) -> None:
    backend, loaded = served
    requests = _requests(6)
    out = backend.serve(loaded, requests, None)
    _check_timelines(out, requests)
    assert out.ttft_origin == "scheduled send"
    assert all(t.arrival_s == out.start_s and t.scheduled_s == out.start_s for t in out.requests)
    # Engine steps, reported in this process between the origin and the last token: the
    # scheduler ran at most max_num_seqs requests, prefilled every prompt token once and
    # produced every output token (each request's first in its prefill step).
    steps = out.steps
    assert steps is not None and steps
    assert all(out.start_s <= s.end_s <= out.end_s + 1.0 for s in steps)
    assert all(s.start_s is not None and s.start_s <= s.end_s for s in steps)
    assert max(s.running for s in steps) == MAX_NUM_SEQS
    assert sum(s.prefill_tokens or 0 for s in steps) == 6 * 12
    assert sum(s.decode_tokens or 0 for s in steps) == 6 * N_TOKENS
    shares = [x for s in steps for x in s.shares or ()]
    for i in range(6):
        assert sum(x.decode_tokens for x in shares if x.request_id == i) == N_TOKENS
        assert sum(x.prefill_tokens for x in shares if x.request_id == i) == 12


@pytest.mark.vllm
def test_open_loop_sends_each_request_at_its_scheduled_time(
    served: tuple[VLLMBackend, LoadedModel],
) -> None:
    backend, loaded = served
    scheduled: list[float | None] = [0.0, 0.4, 0.8, 1.2]
    requests = _requests(4, scheduled)
    out = backend.serve(loaded, requests, None)
    _check_timelines(out, requests)
    assert out.ttft_origin == "scheduled send"
    for t, s in zip(out.requests, scheduled, strict=True):
        assert s is not None
        assert t.scheduled_s == t.arrival_s == pytest.approx(out.start_s + s, abs=1e-9)
        assert t.sent_s >= out.start_s + s - EARLY_S
    # spaced arrivals: the last request was sent over a second after the first
    assert out.requests[-1].sent_s - out.requests[0].sent_s >= 1.2


@pytest.mark.vllm
def test_closed_loop_keeps_at_most_max_concurrency_in_flight(
    served: tuple[VLLMBackend, LoadedModel],
) -> None:
    backend, loaded = served
    requests = _requests(5, [None] * 5)
    out = backend.serve(loaded, requests, 2)
    _check_timelines(out, requests)
    assert out.ttft_origin == "actual send"
    assert all(t.scheduled_s is None for t in out.requests)
    spans = [(t.sent_s, t.chunk_times_s[-1]) for t in out.requests]
    for sent, _ in spans:
        assert sum(1 for a, b in spans if a <= sent < b) <= 2
    # two slots: a third request goes only once one of the first two has finished
    first_two_finish = min(b for _, b in sorted(spans)[:2])
    assert sorted(spans)[2][0] >= first_two_finish
    assert out.steps is not None and max(s.running for s in out.steps) <= 2


@pytest.mark.vllm
def test_saved_outputs_carry_each_requests_text(
    served: tuple[VLLMBackend, LoadedModel],
) -> None:
    backend, loaded = served
    saving = VLLMBackend(replace(backend.sections, save_outputs=True))
    out = saving.serve(loaded, _requests(2), None)
    assert all(t.text for t in out.requests)
    assert all(t.text is None for t in backend.serve(loaded, _requests(1), None).requests)


@pytest.mark.vllm
def test_unload_shuts_the_engine_processes_down(head64_model_dir: Path) -> None:
    before = engine_processes()
    backend = serving_backend(head64_model_dir, "decoder.max_new_tokens=2")
    loaded = backend.load("cpu")
    started = engine_processes() - before
    assert started  # the engine core runs in a process of its own
    out = backend.serve(loaded, _requests(2), None)
    assert [t.output_tokens > 0 for t in out.requests] == [True, True]
    loop_thread = loaded.model.loop.thread
    backend.unload(loaded)
    deadline = time.monotonic() + 30
    while engine_processes() & started and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not engine_processes() & started
    assert loaded.model is None and not loop_thread.is_alive()


# ----------------------------------------------------------------- no engine needed


def _sections(*overrides: str) -> Any:
    from test_vllm_config import experiment

    return sections(experiment("+backend=vllm", *overrides))


def test_a_serving_engine_has_its_own_load_key() -> None:
    offline = VLLMBackend(_sections())
    serving = VLLMBackend(replace(_sections(), serving=True))
    assert offline.load_key("cpu") != serving.load_key("cpu")
    again = VLLMBackend(replace(_sections(), serving=True))
    assert serving.load_key("cpu") == again.load_key("cpu")


def test_serve_on_an_engine_loaded_for_batches_says_so() -> None:
    loaded = LoadedModel(
        model=object(),
        tokenizer=None,
        device="cpu",
        dtype="float32",
        load_kwargs={},
        load_key="k",
        load_s=0.0,
        source="m",
        shape=None,
    )
    with pytest.raises(RunError, match="asynchronous engine"):
        VLLMBackend(_sections()).serve(loaded, _requests(1), None)


def test_engine_steps_come_from_the_schedulers_iteration_details() -> None:
    details = SimpleNamespace(
        num_ctx_requests=1,
        num_ctx_tokens=30,
        num_generation_requests=3,
        num_generation_tokens=3,
        is_dummy=False,
    )
    stats = SimpleNamespace(iteration_details=details, num_running_reqs=3)
    details.elapsed_ms = 250.0
    iteration = SimpleNamespace(num_generation_tokens=4)  # 3 decodes and a first token
    assert engine_step(stats, iteration, 5.0) == EngineStep(5.0, 4, 30, 4, start_s=4.75)
    dummy_details = SimpleNamespace(**{**vars(details), "is_dummy": True})
    dummy = SimpleNamespace(iteration_details=dummy_details)
    assert engine_step(dummy, None, 5.0) is None


def test_without_iteration_details_steps_come_from_the_outputs() -> None:
    """Running after the step plus those it finished; prompt tokens of completed prefills;
    every token produced; no start."""
    stats = SimpleNamespace(iteration_details=None, num_running_reqs=2)
    iteration = SimpleNamespace(
        num_prompt_tokens=20,
        num_generation_tokens=5,
        time_to_first_tokens_iter=[0.1, 0.2],
        finished_requests=[object()],
    )
    assert engine_step(stats, iteration, 1.5) == EngineStep(1.5, 3, 20, 5)
    assert engine_step(stats, None, 1.5) is None


def test_each_request_prefills_in_the_steps_the_scheduler_ran_it() -> None:
    """vLLM appends a suffix to the ids it is given; with the scheduler's totals each request's
    prompt lands where it was computed; where a step's outputs could not be read, no step
    carries shares."""
    logged = [
        LoggedStep(EngineStep(1.0, 2, 20, 2), (("s-0-ab12", 1), ("s-1-cd34", 1)), 20, 0),
        LoggedStep(EngineStep(3.0, 2, 0, 2), (("s-0-ab12", 1), ("s-1-cd34", 1)), 0, 2),
    ]
    steps, note = with_shares(logged, {"s-0": 0, "s-1": 1}, {0: 12, 1: 8}, {0: 12, 1: 8})
    assert steps[0].shares == (StepShare(0, 12, 1), StepShare(1, 8, 1))
    assert steps[1].shares == (StepShare(0, 0, 1), StepShare(1, 0, 1))
    assert note is not None
    unread = [logged[0], LoggedStep(EngineStep(2.0, 1, 9, 0), None), logged[1]]
    steps, note = with_shares(unread, {"s-0": 0, "s-1": 1}, {0: 12, 1: 8}, {0: 12, 1: 8})
    assert all(s.shares is None for s in steps) and note is None


def test_the_engine_loop_runs_coroutines_on_its_own_thread_until_closed() -> None:
    loop = EngineLoop()

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert loop.run(where()) == loop.thread.name != threading.current_thread().name
    assert loop.run(where()) == loop.thread.name  # the same loop, call after call

    async def forever() -> None:
        await asyncio.sleep(3600)

    asyncio.run_coroutine_threadsafe(forever(), loop.loop)
    loop.close()
    assert not loop.thread.is_alive() and loop.loop.is_closed()

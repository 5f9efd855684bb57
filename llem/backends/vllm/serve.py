"""vLLM's serving path: the in-process asynchronous engine (``vllm.v1.engine.async_llm.AsyncLLM``).

A serving run (``BackendSections.serving``) builds an ``AsyncLLM`` from the same engine arguments
as the offline ``vllm.LLM`` and hands each request to it as its own task, when the shared pacing
driver (``llem.backends.traffic.drive``) says so. Each request streams ``RequestOutputKind.DELTA``
outputs; llem stamps every chunk with ``time.perf_counter`` as it reaches this process, with the
tokens it carries.

The engine's output handler is an asyncio task bound to the loop it starts in, so the engine
lives with one event loop of its own, run by a dedicated thread (``EngineLoop``): warm-up and
every ``serve`` call submit their coroutines to it. The engine core runs in a spawned process, so
a script that starts one needs an ``if __name__ == "__main__":`` guard (``python -m llem`` has
one).

Engine steps come from vLLM's stat-logger interface and the engine's outputs of each step
(``llem.backends.vllm.steps``). The serving engine turns on ``enable_logging_iteration_details``,
so each step carries what the scheduler ran: its requests, prompt (prefill) tokens and the core's
model-execution time.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from llem.backends.tokens import token_lists
from llem.backends.traffic.driver import drive
from llem.backends.vllm.kwargs import stop_kwargs
from llem.backends.vllm.speculation import VLLMSpeculation, count_requests, count_step
from llem.backends.vllm.steps import (
    SERVE_CLOCK,
    LoggedStep,
    StepLog,
    step_logger_factory,
    watch_outputs,
    with_shares,
)
from llem.errors import RunError, first_line
from llem.vocabulary.workload import RequestTimeline, ScheduledRequest, ServeOutput

T = TypeVar("T")

#: Engine arguments the serving engine sets unless the user did (``vllm.engine_kwargs``): no
#: default stat loggers (as ``vllm.LLM``), and per-step scheduler details for ``EngineStep``.
SERVING_DEFAULTS: dict[str, Any] = {
    "disable_log_stats": True,
    "enable_logging_iteration_details": True,
}


def serving_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The offline engine's arguments with the serving engine's defaults under them."""
    return {**SERVING_DEFAULTS, **kwargs}


class EngineLoop:
    """One asyncio event loop on a daemon thread, for the life of one engine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="llem-vllm-engine-loop", daemon=True
        )
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the engine's loop and wait for its result (or its exception)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        """Cancel what is left on the loop, stop it and join its thread."""
        if self.loop.is_closed():
            return

        async def cancel_rest() -> None:
            me = asyncio.current_task()
            rest = [t for t in asyncio.all_tasks() if t is not me]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        if self.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(cancel_rest(), self.loop).result(timeout=10)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


@dataclass
class AsyncEngine:
    """A running ``AsyncLLM``, the loop it lives on and the steps it has reported."""

    engine: Any
    loop: EngineLoop
    steps: StepLog
    calls: int = 0

    @property
    def vllm_config(self) -> Any:
        return self.engine.vllm_config

    def shutdown(self) -> None:
        """Stop the engine core's processes, then the loop, and drop the engine (idempotent:
        whatever still holds this object no longer keeps the ``AsyncLLM`` alive)."""
        engine, self.engine = self.engine, None
        try:
            if engine is not None:
                engine.shutdown()
        finally:
            self.loop.close()


def start_async_engine(kwargs: dict[str, Any]) -> AsyncEngine:
    """Build an ``AsyncLLM`` from ``vllm.LLM``-style engine arguments, on a loop of its own."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    steps = StepLog()
    loop = EngineLoop()

    async def build() -> Any:
        args = AsyncEngineArgs(**serving_kwargs(kwargs))
        return AsyncLLM.from_engine_args(args, stat_loggers=[step_logger_factory(steps)])

    try:
        engine = loop.run(build())
    except BaseException:
        loop.close()
        raise
    watch_outputs(engine, steps)
    return AsyncEngine(engine=engine, loop=loop, steps=steps)


@dataclass(frozen=True)
class _Stream:
    """What every request of one ``serve`` call shares."""

    engine: Any
    params: dict[int, Any]  # per request: the run's sampling, with its prompt's stop strings
    inputs: dict[int, Any]
    input_tokens: dict[int, int]
    prefix: str
    save_outputs: bool
    # per request: vLLM's speculative metrics at its end (``CompletionOutput.spec_decode_metrics``)
    speculation: dict[int, Any] = field(default_factory=dict)


async def _submit(s: _Stream, request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
    """Hand one request to the engine and stream it to the end."""
    times: list[float] = []
    counts: list[int] = []
    texts: list[str] = []
    cached: int | None = None
    rid = f"{s.prefix}-{request.request_id}"
    sent = time.perf_counter()
    reason: str | None = None
    params = s.params[request.request_id]
    async for out in s.engine.generate(s.inputs[request.request_id], params, rid):
        now = time.perf_counter()
        n = sum(len(c.token_ids) for c in out.outputs)
        if n:
            times.append(now)
            counts.append(n)
        hits = getattr(out, "num_cached_tokens", None)
        if isinstance(hits, int):
            cached = max(hits, cached or 0)
        if s.save_outputs and out.outputs:
            texts.append(out.outputs[0].text)
        if out.outputs and out.outputs[0].finish_reason is not None:
            reason = str(out.outputs[0].finish_reason)
            s.speculation[request.request_id] = getattr(out.outputs[0], "spec_decode_metrics", None)
    return RequestTimeline(
        request_id=request.request_id,
        prompt_index=request.prompt_index,
        arrival_s=arrival_s,
        scheduled_s=arrival_s if request.scheduled_s is not None else None,
        sent_s=sent,
        chunk_times_s=times,
        chunk_tokens=counts,
        input_tokens=s.input_tokens[request.request_id],
        cached_input_tokens=cached,
        text="".join(texts) if s.save_outputs else None,
        finish_reason=reason,
    )


def render_prompts(engine: Any, tokens: list[list[int]], max_model_len: int | None) -> list[Any]:
    """The engine's inputs for ``tokens`` (one prompt each); a prompt it rejects is a RunError."""
    try:
        return list(engine.renderer.render_cmpl([{"prompt_token_ids": t} for t in tokens]))
    except Exception as exc:  # e.g. a prompt longer than the engine's max_model_len
        raise RunError(
            f"vLLM rejected the prompts: {first_line(exc)}",
            hint=f"the engine's max_model_len is {max_model_len}; raise "
            "vllm.max_model_len or use shorter prompts (dataset.*)",
        ) from exc


def serve_requests(
    aengine: AsyncEngine,
    tokenizer: Any,
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
    sampling_kwargs: dict[str, Any],
    save_outputs: bool = False,
    speculation: VLLMSpeculation | None = None,
) -> ServeOutput:
    """Serve ``requests`` through the engine, paced by the shared driver; every request's
    timeline and the engine's steps between the workload's origin and its last token. The
    window's speculation (the steps' counters and each request's own) is added to
    ``speculation`` where given."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    engine = aengine.engine
    tokens = token_lists(tokenizer, [r.prompt for r in requests])
    limit = aengine.vllm_config.model_config.max_model_len
    rendered = render_prompts(engine, tokens, limit)
    aengine.calls += 1
    stream = _Stream(
        engine=engine,
        params={
            r.request_id: SamplingParams(
                **sampling_kwargs, **stop_kwargs(r.prompt), output_kind=RequestOutputKind.DELTA
            )
            for r in requests
        },
        inputs={r.request_id: x for r, x in zip(requests, rendered, strict=True)},
        input_tokens={r.request_id: len(t) for r, t in zip(requests, tokens, strict=True)},
        prefix=f"llem-serve-{aengine.calls}",
        save_outputs=save_outputs,
    )

    async def run() -> tuple[float, list[RequestTimeline], list[LoggedStep]]:
        before = len(aengine.steps.steps)

        async def submit(request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
            return await _submit(stream, request, arrival_s)

        try:
            start, timelines = await drive(requests, max_concurrency, submit)
        except BaseException:
            await engine.abort([f"{stream.prefix}-{r.request_id}" for r in requests])
            raise
        return start, timelines, aengine.steps.steps[before:]

    try:
        start, timelines, steps = aengine.loop.run(run())
    except (RunError, ValueError):
        raise
    except Exception as exc:
        raise RunError(f"vLLM serving failed: {type(exc).__name__}: {first_line(exc)}") from exc
    _count(speculation, start, steps, timelines, stream.speculation)
    return _output(start, timelines, steps, requests, stream.prefix)


def _count(
    counted: VLLMSpeculation | None,
    start: float,
    steps: list[LoggedStep],
    timelines: list[RequestTimeline],
    metrics: dict[int, Any],
) -> None:
    """The served workload's speculation: the counters of its steps (those that ended after its
    origin) and each request's metrics with the tokens of each of its chunks (one chunk per engine
    step: the engine streams every step's new tokens), in request order."""
    for s in steps:
        if s.step.end_s >= start:
            count_step(counted, s)
    ordered = sorted(timelines, key=lambda t: t.request_id)
    count_requests(
        counted, [metrics.get(t.request_id) for t in ordered], [t.chunk_tokens for t in ordered]
    )


def _output(
    start: float,
    timelines: list[RequestTimeline],
    steps: list[LoggedStep],
    requests: Sequence[ScheduledRequest],
    prefix: str,
) -> ServeOutput:
    """The served workload's output: the timelines, and the steps since its origin with each
    request's share (its chunks placed by ``with_shares``)."""
    finishes = [t.finish_s for t in timelines if t.finish_s is not None]
    closed = bool(requests) and all(r.scheduled_s is None for r in requests)
    ids = {f"{prefix}-{r.request_id}": r.request_id for r in requests}
    sent = sorted(timelines, key=lambda t: t.sent_s)  # vLLM serves first come first
    prefill = {t.request_id: t.input_tokens - (t.cached_input_tokens or 0) for t in sent}
    prompt = {t.request_id: t.input_tokens for t in sent}
    arrival = {t.request_id: t.sent_s for t in sent}
    shared, placement = with_shares(
        [s for s in steps if s.step.end_s >= start], ids, prefill, prompt, arrival
    )
    return ServeOutput(
        start_s=start,
        end_s=max(finishes, default=start),
        requests=timelines,
        ttft_origin="actual send" if closed else "scheduled send",
        steps=shared,
        step_clock=SERVE_CLOCK if placement is None else f"{SERVE_CLOCK}; {placement.note}",
        shares_estimated=None if placement is None else placement.unplaced and placement.note,
    )

"""``pytorch.batching=continuous``: serve a workload through transformers' own continuous batching.

The manager (``llem.backends.pytorch.cb_manager``: sized from the run's sections, started before
the window) schedules the requests step by step in its background thread. llem does not schedule
anything itself: the shared pacing driver (``llem.backends.traffic.drive``) decides when each
request is handed over, and this module hands it to the manager and streams its tokens back into
asyncio (the manager's ``register_result_handler`` delivers each step's outputs onto the event
loop with one ``call_soon_threadsafe``).

Stop strings (``Prompt.stop``), which the manager ignores: a request is cancelled once its text
holds one (its handler dropped first, so no later output reaches a closed event loop).

The workload's steps (``ServeOutput.steps``: start, end, each request's prefill and produced
tokens) are those the manager's wrapped batch processor recorded
(``llem.backends.pytorch.cb_steps``); where a transformers version does not allow it, steps are
None and ``step_clock`` says why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from llem.backends.pytorch.cb_manager import (
    ContinuousEngine,
    ServingModel,
    serving_model,
    start,
)
from llem.backends.pytorch.cb_steps import CLOCK, RawStep, StepRecorder
from llem.backends.pytorch.kwargs import Sections, is_oom, oom_error
from llem.backends.stops import STOP, cut_chunks, finish_reason, stop_index, tail_has_stop
from llem.backends.tokens import token_lists
from llem.backends.traffic.driver import drive
from llem.errors import RunError
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import (
    EngineStep,
    Prompt,
    RequestTimeline,
    ScheduledRequest,
    ServeOutput,
    StepShare,
)

log = logging.getLogger(__name__)

_WATCH_S = 1.0  # how often a waiting request checks that the manager's thread is still alive


# ----------------------------------------------------------------------------------- serving
def warm_up(
    sections: Sections, loaded: LoadedModel, batches: Sequence[Sequence[Prompt]], n_batches: int
) -> None:
    """Start the engine sized for every prompt of ``batches``, then serve the prompts of
    ``n_batches`` batches at once (cycling through them), all outside the measured window."""
    prompts = [p for batch in batches for p in batch]
    start(sections, loaded, prompts)
    chosen = [p for i in range(n_batches) for p in batches[i % len(batches)]] if batches else []
    if chosen:
        requests = [ScheduledRequest(i, i, p, 0.0) for i, p in enumerate(chosen)]
        serve(sections, loaded, requests, None)


def serve(
    sections: Sections,
    loaded: LoadedModel,
    requests: Sequence[ScheduledRequest],
    max_concurrency: int | None,
) -> ServeOutput:
    """Send each request when the traffic says (the shared driver), stream its tokens back."""
    model = serving_model(loaded)
    prompts = [r.prompt for r in requests]
    ids = token_lists(model.tokenizer, prompts)
    engine = model.engine
    if engine is None or max((len(t) for t in ids), default=0) > engine.max_prompt_tokens:
        log.warning(
            "continuous batching starts inside serve (warm_up did not start it for these "
            "prompts): its start-up time falls inside the measured window"
        )
        engine = start(sections, loaded, prompts)
    token_ids = {r.request_id: t for r, t in zip(requests, ids, strict=True)}
    submit = _Submitter(sections, model, engine, token_ids)
    recorder = engine.steps
    if isinstance(recorder, StepRecorder):
        recorder.take()  # steps before this workload (warm-up, earlier runs) are not its own
    start_s, timelines = asyncio.run(drive(requests, max_concurrency, submit))
    steps, clock = _engine_steps(recorder, submit.names)
    finishes = [t.finish_s for t in timelines if t.finish_s is not None]
    closed = bool(requests) and all(r.scheduled_s is None for r in requests)
    return ServeOutput(
        start_s=start_s,
        end_s=max(finishes, default=time.perf_counter()),
        requests=timelines,
        ttft_origin="actual send" if closed else "scheduled send",
        steps=steps,
        step_clock=clock,
    )


def _engine_steps(
    recorder: StepRecorder | str, names: dict[str, int]
) -> tuple[list[EngineStep] | None, str]:
    """The recorded steps with llem's request ids (-1 for a request not of this workload), and
    their clock; or None and why there are none."""
    if isinstance(recorder, str):
        return None, recorder
    raw = recorder.take()
    if recorder.broken is not None:
        return None, recorder.broken
    return [_engine_step(s, names) for s in raw], CLOCK


def _engine_step(raw: RawStep, names: dict[str, int]) -> EngineStep:
    shares = [StepShare(names.get(n, -1), p, d) for n, p, d in raw.shares]
    return EngineStep.of_shares(raw.start_s, raw.end_s, shares)


class _Submitter:
    """``submit`` for the driver: hand one request to the manager, await its streamed outputs."""

    def __init__(
        self,
        sections: Sections,
        model: ServingModel,
        engine: ContinuousEngine,
        token_ids: dict[int, list[int]],
    ) -> None:
        self.sections = sections
        self.tokenizer = model.tokenizer
        self.engine = engine
        self.token_ids = token_ids
        self.names: dict[str, int] = {}  # the manager's request id -> llem's request id

    async def __call__(self, request: ScheduledRequest, arrival_s: float) -> RequestTimeline:
        manager = self.engine.manager
        name = f"llem-{next(self.engine.ids)}"
        self.names[name] = request.request_id
        inbox: asyncio.Queue[tuple[float, Any]] = asyncio.Queue()
        manager.register_result_handler(
            name, lambda out: inbox.put_nowait((time.perf_counter(), out))
        )
        prompt = self.token_ids[request.request_id]
        sent = time.perf_counter()
        accepted = manager.add_request(
            prompt,
            request_id=name,
            max_new_tokens=self.sections.decoder.max_new_tokens,
            streaming=True,
        )
        if accepted is None:
            raise RunError("continuous batching refused a request: its manager is not running")
        times, counts, tokens, reason = await self._stream(name, inbox, request.prompt.stop)
        text = None
        if self.sections.save_outputs:
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        scheduled = request.scheduled_s
        return RequestTimeline(
            request_id=request.request_id,
            prompt_index=request.prompt_index,
            arrival_s=arrival_s,
            scheduled_s=None if scheduled is None else arrival_s,
            sent_s=sent,
            chunk_times_s=times,
            chunk_tokens=counts,
            input_tokens=len(prompt),
            text=text,
            finish_reason=reason,
        )

    async def _stream(
        self, name: str, inbox: asyncio.Queue[tuple[float, Any]], stops: Sequence[str]
    ) -> tuple[list[float], list[int], list[int], str]:
        """Each output's arrival time and tokens added, its tokens and why it ended: when it
        finishes, or when its text holds one of ``stops`` (cancelled there; see the module)."""
        times: list[float] = []
        counts: list[int] = []
        seen = 0
        while True:
            arrived, out = await self._next(name, inbox)
            if out.error is not None:
                self._fail(name, out.error)
            tokens = list(out.generated_tokens)
            new = len(tokens) - seen
            if new > 0:
                times.append(arrived)
                counts.append(new)
                seen += new
                if tail_has_stop(self.tokenizer, tokens, stops):
                    _cancel(self.engine.manager, name)
                    end = stop_index(self.tokenizer, tokens, stops) or len(tokens)
                    times, counts = cut_chunks(times, counts, end)
                    return times, counts, tokens[:end], STOP
            if out.is_finished():
                eos = self.engine.manager.generation_config.eos_token_id
                limit = self.sections.decoder.max_new_tokens
                return times, counts, tokens, finish_reason(tokens, limit, eos)

    async def _next(self, name: str, inbox: asyncio.Queue[tuple[float, Any]]) -> tuple[float, Any]:
        while True:
            try:
                return await asyncio.wait_for(inbox.get(), timeout=_WATCH_S)
            except asyncio.TimeoutError:
                if not self.engine.manager.is_running():
                    raise RunError(
                        f"continuous batching stopped before request {name} finished "
                        "(its generation thread has exited; see the log above)"
                    ) from None

    def _fail(self, name: str, error: str) -> None:
        if is_oom(RuntimeError(error)):
            raise oom_error(self.sections, "serve", RuntimeError(error))
        raise RunError(f"continuous batching failed request {name}: {error.splitlines()[0]}")


def _cancel(manager: Any, name: str) -> None:
    handlers = getattr(getattr(manager, "output_router", None), "result_handlers", None)
    if isinstance(handlers, dict):  # transformers 5.2x: request id -> (callback, loop)
        handlers.pop(name, None)
    manager.cancel_request(name)

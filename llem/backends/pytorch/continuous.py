"""``pytorch.batching=continuous``: serve a workload through transformers' own continuous batching.

transformers (5.x) ships a continuous-batching engine: ``model.init_continuous_batching()``
returns a ``ContinuousBatchingManager`` whose background thread schedules requests step by step
over a paged KV cache (``add_request``, streamed ``GenerationOutput``s, ``start``/``stop``). llem
does not schedule anything itself: the shared pacing driver (``llem.backends.traffic.drive``)
decides when each request is handed over, and this module hands it to the manager and streams
its tokens back into asyncio (the manager's ``register_result_handler`` delivers each step's
outputs onto the event loop with one ``call_soon_threadsafe``).

How the ``pytorch:`` and ``decoder:`` sections map onto it:

- ``pytorch.batch_size`` -> ``ContinuousBatchingConfig.max_requests_per_batch``: the requests one
  step works on, at most (decoding requests go first, so it bounds the running batch, like vLLM's
  ``max_num_seqs``).
- the KV cache (``num_blocks``) and the tokens per step (``max_batch_tokens``) are sized from the
  run's prompts: room for ``batch_size`` requests of the longest prompt plus ``max_new_tokens``
  (left to itself, transformers sizes the cache from free memory: 60% of the host's RAM on a CPU).
- decoding: the same ``generate()`` keyword arguments as the static path (``build_generate_kwargs``)
  laid over the model's generation config. What continuous batching cannot honour (beams, prompt
  lookup, no-repeat n-grams, min_new_tokens, repetition penalty, a disabled or other KV cache,
  llem's torch.compile wrapper) is a configuration error (``continuous_batching_problems``).
- prefix sharing of KV blocks is off: the static path has no prefix cache, and the manager does
  not say how many prompt tokens a request took from it.
- stop strings (``Prompt.stop``), which the manager ignores: a request is cancelled once its text
  holds one (its handler dropped first, so no later output reaches a closed event loop).

The manager starts (cache allocation, its own warm-up) in ``warm_up``, before the measured window,
and keeps running between runs that reuse the model with the same settings; ``stop`` ends it.
Its steps (``ServeOutput.steps``: start, end, each request's prefill and produced tokens) are
recorded by wrapping its batch processor (``llem.backends.pytorch.cb_steps``); where a
transformers version does not allow it, steps are None and ``step_clock`` says why.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.backends.pytorch.cb_steps import CLOCK, RawStep, StepRecorder
from llem.backends.pytorch.compile import TorchModel
from llem.backends.pytorch.kwargs import Sections, build_generate_kwargs, is_oom, oom_error
from llem.backends.stops import STOP, cut_chunks, finish_reason, stop_index, tail_has_stop
from llem.backends.tokens import token_lists
from llem.backends.traffic.driver import drive
from llem.config.batching import continuous_batching_problems
from llem.errors import ConfigError, RunError
from llem.vocabulary import (
    EngineStep,
    LoadedModel,
    Prompt,
    RequestTimeline,
    ScheduledRequest,
    ServeOutput,
    StepShare,
)

log = logging.getLogger(__name__)

CONTINUOUS = "continuous"
_CB_LOGGER = "ContinuousBatchingLogger"  # transformers.generation.continuous_batching.utils
# Tokens per step when the prompts would ask for more (transformers' own default).
_MAX_BATCH_TOKENS = 8192
# The FIFO scheduler holds new prefills back when under 15% of the cache is free: leave that room.
_SAFETY_MARGIN = 0.15
_DEFAULT_BLOCK = 256
_WATCH_S = 1.0  # how often a waiting request checks that the manager's thread is still alive


# ------------------------------------------------------------------------------------- rules
def check(sections: Sections) -> None:
    """Raise the configuration error before anything loads (the CLI's validation says the same)."""
    problems = continuous_batching_problems(sections.engine, sections.decoder, sections.speculative)
    if problems:
        raise ConfigError(problems)


# ------------------------------------------------------------------------------------ engine
@dataclass
class ContinuousEngine:
    """A started ``ContinuousBatchingManager`` and what it was started with."""

    manager: Any
    settings: str  # equal settings reuse the running manager
    startup_s: float  # init_continuous_batching + warmup + start, seconds
    max_requests_per_batch: int
    num_blocks: int
    max_batch_tokens: int
    max_prompt_tokens: int  # the longest prompt the cache was sized for
    ids: itertools.count[int] = field(default_factory=itertools.count)
    steps: StepRecorder | str = "steps not recorded"  # the recorder, or why there is none


@dataclass
class ServingModel(TorchModel):
    """A model loaded to serve (``BackendSections.serving``): its continuous-batching engine."""

    engine: ContinuousEngine | None = None


def _serving_model(loaded: LoadedModel) -> ServingModel:
    if not isinstance(loaded, ServingModel):
        raise TypeError(
            f"continuous batching was handed a {type(loaded).__name__}, not a model "
            "loaded to serve (BackendSections.serving)"
        )
    return loaded


def generation_config(sections: Sections, model: Any) -> Any:
    """The model's generation config with the static path's ``generate()`` kwargs laid over it."""
    import copy

    gen = copy.deepcopy(model.generation_config)
    gen.update(**build_generate_kwargs(sections))
    return gen


def sizing(sections: Sections, prompt_tokens: Sequence[int]) -> dict[str, int]:
    """max_requests_per_batch, num_blocks and max_batch_tokens for these prompt lengths."""
    requests = sections.engine.batch_size
    longest = max(prompt_tokens, default=1)
    per_request = math.ceil((longest + sections.decoder.max_new_tokens) / _DEFAULT_BLOCK)
    return {
        "max_requests_per_batch": requests,
        "num_blocks": math.ceil(requests * per_request / (1 - _SAFETY_MARGIN)) + 1,
        "max_batch_tokens": max(requests, min(_MAX_BATCH_TOKENS, requests * longest)),
    }


def one_at_a_time(size: dict[str, int]) -> str | None:
    """The warning for a manager sized to one request at a time (pytorch.batch_size=1, the
    default): requests then queue behind each other and nothing is batched."""
    if size["max_requests_per_batch"] != 1:
        return None
    return (
        "pytorch.batch_size=1: continuous batching holds one request at a time, so requests "
        "queue behind each other and nothing is batched; set pytorch.batch_size to the requests "
        "one step may hold (e.g. pytorch.batch_size=16)"
    )


def _cb_config(sections: Sections, size: dict[str, int]) -> Any:
    from dataclasses import fields

    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    names = {f.name for f in fields(ContinuousBatchingConfig)}
    # seed: the manager seeds torch itself (a random seed when given none)
    kwargs: dict[str, Any] = {**size, "allow_block_sharing": False, "seed": sections.run_seed}
    if "auto_switch_to_flash" in names:  # transformers >= 5.2x: keep pytorch.attn_implementation
        kwargs["auto_switch_to_flash"] = False
    return ContinuousBatchingConfig(**kwargs)


def start(sections: Sections, loaded: LoadedModel, prompts: Sequence[Prompt]) -> ContinuousEngine:
    """The running engine for these settings and prompts: the one already running if it fits,
    else a new one (the old one stopped). Its start-up time is ``engine.startup_s``."""
    model = _serving_model(loaded)
    lengths = [len(t) for t in token_lists(model.tokenizer, prompts)]
    size = sizing(sections, lengths)
    if warning := one_at_a_time(size):
        log.warning("%s", warning)
    gen = generation_config(sections, model.model)
    settings = json.dumps(
        [size, gen.to_json_string(), sections.run_seed], sort_keys=True, default=str
    )
    old = model.engine
    if old is not None and old.settings == settings and old.manager.is_running():
        return old
    stop(model)
    t0 = time.perf_counter()
    # transformers' continuous batching prints its own INFO lines straight to the console (its
    # logger does not propagate); llem's log says what matters (start-up, sizes)
    logging.getLogger(_CB_LOGGER).setLevel(logging.WARNING)
    manager = model.model.init_continuous_batching(
        generation_config=gen, continuous_batching_config=_cb_config(sections, size)
    )
    manager.warmup()
    steps = StepRecorder.attach(manager)
    _start_as_daemon(manager)
    startup = time.perf_counter() - t0
    log.info("continuous batching started in %.3f s (%s)", startup, size)
    model.engine = ContinuousEngine(
        manager,
        settings,
        startup,
        max_requests_per_batch=size["max_requests_per_batch"],
        num_blocks=size["num_blocks"],
        max_batch_tokens=size["max_batch_tokens"],
        max_prompt_tokens=max(lengths, default=1),
        steps=steps,
    )
    model.prefix_caching = False
    return model.engine


def _start_as_daemon(manager: Any) -> None:
    """``manager.start()`` from a daemon thread, so that its generation thread (which inherits
    the flag) cannot keep the process alive when a caller never unloads the model."""
    import threading

    starter = threading.Thread(target=manager.start, name="llem-cb-start", daemon=True)
    starter.start()
    starter.join()


def stop(loaded: LoadedModel | None) -> None:
    """Stop the manager's thread (pending requests finish first) and drop it."""
    if not isinstance(loaded, ServingModel) or loaded.engine is None:
        return
    engine, loaded.engine = loaded.engine, None
    if engine.manager.is_running():
        engine.manager.stop(block=True, timeout=60)


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
    model = _serving_model(loaded)
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
    shares = tuple(StepShare(names.get(n, -1), p, d) for n, p, d in raw.shares)
    return EngineStep(
        end_s=raw.end_s,
        running=len(shares),
        prefill_tokens=sum(s.prefill_tokens for s in shares),
        decode_tokens=sum(s.decode_tokens for s in shares),
        start_s=raw.start_s,
        shares=shares,
    )


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

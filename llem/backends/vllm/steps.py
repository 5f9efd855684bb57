"""vLLM's engine steps: what its stat logger reports each step (``StatLoggerBase.record``, called
in llem's process once per engine step as the step's outputs arrive) joined with the outputs of
that step per request (the engine's output processor, watched by ``watch_outputs``).

A step's ``end_s`` is ``time.perf_counter`` when its statistics arrive (the clock of the request
timelines), not the engine core's own step end; its start is the core's model-execution time
(``SchedulerIterationDetails.elapsed_ms``, with ``enable_logging_iteration_details``) earlier. The
shares: each request's produced tokens in the step, and the prompt tokens it computed there: its
prefill chunks and any recompute after preemption, placed by ``llem.backends.vllm.chunks`` from
the scheduler's per-step totals (or spread, with the reason, where those do not add up).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.backends.vllm.chunks import Placement, SeenStep, place
from llem.backends.vllm.core_process import CORE_IN_PROCESS, CORE_OWN_PROCESS, core_in_process
from llem.vocabulary.workload import EngineStep

#: How the serving engine's step times are taken (``ServeOutput.step_clock``).
SERVE_CLOCK = (
    "time.perf_counter in llem's process: a step ends when vLLM's stat logger receives its "
    "statistics (as its outputs reach this process, after the engine core's own step end) and "
    "starts the engine core's model-execution time earlier (the scheduler's iteration details), "
    "never before the previous step's end"
)


@dataclass(frozen=True)
class LoggedStep:
    """One step as logged: the step (no shares yet) and the tokens each engine request id got
    from it (None where llem could not read the step's outputs: ``StepLog.broken``)."""

    step: EngineStep
    made: tuple[tuple[str, int], ...] | None
    ctx_tokens: int | None = None  # scheduled prompt tokens of requests with no output yet
    gen_tokens: int | None = None  # scheduled tokens of requests with output (recompute too)
    # the step's speculative counters (vLLM's SpecDecodingStats; None: no verification), under
    # SchedulerStats' own name, so a logged step counts as the scheduler's report does
    spec_decoding_stats: Any = None


@dataclass
class StepLog:
    """The engine's steps as vLLM's stat logger reports them (appended on the engine's loop),
    with each step's outputs per request (from the output processor, ``watch_outputs``)."""

    steps: list[LoggedStep] = field(default_factory=list)
    broken: str | None = None  # why per-request shares stopped being recorded
    _made: dict[int, list[tuple[str, int]]] = field(default_factory=dict)

    def outputs(self, iteration_stats: Any, outputs: Sequence[Any]) -> None:
        """One call of the output processor: the step's outputs (or a slice of them)."""
        if iteration_stats is None:
            return
        made = self._made.setdefault(id(iteration_stats), [])
        made.extend((str(o.request_id), len(o.new_token_ids)) for o in outputs)

    def record(self, scheduler_stats: Any, iteration_stats: Any) -> None:
        # no iteration stats: the step delivered no outputs (e.g. prefill chunks only)
        made = self._made.pop(id(iteration_stats), None) if iteration_stats is not None else []
        step = engine_step(scheduler_stats, iteration_stats, time.perf_counter())
        if step is None:
            return
        if self.steps and step.start_s is not None:
            step.start_s = max(step.start_s, self.steps[-1].step.end_s)
        known = made is not None and self.broken is None
        ctx, gen = scheduled_tokens(scheduler_stats)
        self.steps.append(
            LoggedStep(
                step,
                tuple(made) if known and made is not None else None,
                ctx,
                gen,
                getattr(scheduler_stats, "spec_decoding_stats", None),
            )
        )


def scheduled_tokens(scheduler_stats: Any) -> tuple[int | None, int | None]:
    """The step's scheduled tokens from its iteration details: those of requests with no output
    yet (prefill chunks), and those of the others (decodes and recomputes); None without them."""
    details = getattr(scheduler_stats, "iteration_details", None)
    if details is None or getattr(details, "is_dummy", False):
        return None, None
    return int(details.num_ctx_tokens), int(details.num_generation_tokens)


def engine_step(scheduler_stats: Any, iteration_stats: Any, now: float) -> EngineStep | None:
    """One step from vLLM's per-step statistics, or None for a report of no work.

    ``decode_tokens``: the tokens the step produced (``IterationStats.num_generation_tokens``, a
    prefill's first token included). With iteration details (the serving engine's default): the
    requests the scheduler ran, the prompt tokens it scheduled, and a start the engine core's
    model-execution time before ``now``. Without them: the requests running after the step (plus
    those it finished), the prompt tokens of requests whose prefill completed, and no start."""
    details = getattr(scheduler_stats, "iteration_details", None)
    made = int(iteration_stats.num_generation_tokens) if iteration_stats is not None else 0
    if details is not None:
        if getattr(details, "is_dummy", False):
            return None
        return EngineStep(
            end_s=now,
            running=int(details.num_ctx_requests + details.num_generation_requests),
            prefill_tokens=int(details.num_ctx_tokens),
            decode_tokens=made,
            start_s=now - float(details.elapsed_ms) / 1000.0,
        )
    if iteration_stats is None:
        return None
    running = getattr(scheduler_stats, "num_running_reqs", None)
    finished = len(getattr(iteration_stats, "finished_requests", ()))
    return EngineStep(
        end_s=now,
        running=int(running) + finished if running is not None else 0,
        prefill_tokens=int(iteration_stats.num_prompt_tokens),
        decode_tokens=made,
    )


def watch_outputs(engine: Any, log: StepLog) -> None:
    """Wrap the engine's ``output_processor.process_outputs`` so that ``log`` sees each step's
    outputs per request; where the engine has none, the steps carry no shares (``log.broken``)."""
    processor: Any = getattr(engine, "output_processor", None)
    original = getattr(processor, "process_outputs", None)
    if not callable(original):
        log.broken = "this vLLM's engine has no output_processor.process_outputs to read"
        return

    def process_outputs(outputs: Any, *args: Any, **kwargs: Any) -> Any:
        if log.broken is None:
            try:
                stats = args[1] if len(args) > 1 else kwargs.get("iteration_stats")
                log.outputs(stats, outputs)
            except Exception as exc:  # an internal of vLLM changed shape
                log.broken = f"reading vLLM's step outputs failed ({type(exc).__name__}: {exc})"
        return original(outputs, *args, **kwargs)

    processor.process_outputs = process_outputs


def with_shares(
    logged: Sequence[LoggedStep],
    ids: dict[str, int],
    prefill: dict[int, int],
    prompt: dict[int, int],
    arrival_s: dict[int, float] | None = None,
) -> tuple[list[EngineStep], Placement | None]:
    """The steps with each request's share (``llem.backends.vllm.chunks.place``: its produced
    tokens and the prompt tokens it computed in the step), and how the prefill was placed (None
    where the steps carry no shares). Engine ids map to llem's through ``ids`` (vLLM appends
    ``-<suffix>`` to the ids it is given); ``arrival_s``: when each request was sent."""
    if not logged or any(ls.made is None for ls in logged):
        return [ls.step for ls in logged], None
    records = [
        SeenStep(
            tuple((ids.get(n, ids.get(n.rsplit("-", 1)[0], -1)), k) for n, k in ls.made or ()),
            ls.ctx_tokens,
            ls.gen_tokens,
        )
        for ls in logged
    ]
    arrival = {
        rid: next((k for k, ls in enumerate(logged) if ls.step.end_s > t), len(logged))
        for rid, t in (arrival_s or {}).items()
    }
    placed = place(records, prefill, prompt, arrival)
    steps = [
        dataclasses.replace(ls.step, shares=shares)
        for ls, shares in zip(logged, placed.shares, strict=True)
    ]
    return steps, placed


def step_logger_factory(log: StepLog) -> Callable[[Any, int], Any]:
    """A vLLM per-engine stat-logger factory whose loggers feed ``log``."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class StepLogger(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
        ) -> None:
            log.record(scheduler_stats, iteration_stats)

        def log_engine_initialized(self) -> None:
            pass

    return StepLogger


#: How the offline engine's step times are taken (``BatchOutput.step_clock``; ``{core}``: where
#: the engine's core ran, ``core_process.CORE_OWN_PROCESS`` or ``CORE_IN_PROCESS``).
OFFLINE_CLOCK = (
    "time.perf_counter in llem's process: a step ends when LLMEngine.step() returned its outputs "
    "({core}) and starts where the previous step ended (the first at the batch's start)"
)


def offline_clock(environ: Mapping[str, str] | None = None) -> str:
    """``OFFLINE_CLOCK`` for where the engine's core runs."""
    return OFFLINE_CLOCK.format(
        core=CORE_IN_PROCESS if core_in_process(environ) else CORE_OWN_PROCESS
    )


class OfflineSteps:
    """The offline engine's steps as llem steps it (``LLMEngine.step``): each call that returned
    outputs, or reported the scheduler's totals (a step of prefill chunks only), is a step, with
    the tokens each request (its index in the batch) got from it."""

    def __init__(self, start_s: float) -> None:
        self._last = start_s
        self._raw: list[tuple[float, float, SeenStep]] = []

    def step(
        self,
        now: float,
        made: Sequence[tuple[int, int]],
        scheduled: tuple[int | None, int | None] = (None, None),
    ) -> None:
        ctx, gen = scheduled
        if made or ctx or gen:
            self._raw.append((self._last, now, SeenStep(tuple(made), ctx, gen)))
            self._last = now

    def engine_steps(
        self, prefill: Sequence[int], prompt: Sequence[int]
    ) -> tuple[list[EngineStep], Placement]:
        """The steps with each request's share (``chunks.place``: ``prefill`` is each request's
        prompt less prefix-cache hits, ``prompt`` its whole prompt), and how they were placed."""
        placed = place(
            [r for _, _, r in self._raw], dict(enumerate(prefill)), dict(enumerate(prompt))
        )
        steps = [
            EngineStep.of_shares(start, end, shares)
            for (start, end, _), shares in zip(self._raw, placed.shares, strict=True)
        ]
        return steps, placed


class LatestStats:
    """The scheduler statistics of the engine's latest step (``pop`` takes them)."""

    def __init__(self) -> None:
        self._latest: Any = None

    def put(self, stats: Any) -> None:
        if stats is not None:
            self._latest = stats

    def pop(self) -> Any:
        latest, self._latest = self._latest, None
        return latest


def watch_scheduler_stats(engine: Any) -> LatestStats:
    """Each step's ``SchedulerStats`` as ``LLMEngine.step`` hands them to its output processor
    (``update_scheduler_stats``; with stats logging on, they carry the iteration details).
    Where the engine has no such hook the steps carry no totals (their prefill is spread)."""
    latest = LatestStats()
    processor: Any = getattr(engine, "output_processor", None)
    original = getattr(processor, "update_scheduler_stats", None)
    if not callable(original) or getattr(original, "_llem_watched", None) is not None:
        return getattr(original, "_llem_watched", latest)

    def update_scheduler_stats(stats: Any, *args: Any, **kwargs: Any) -> Any:
        watcher.put(stats)
        return original(stats, *args, **kwargs)

    watcher = latest
    update_scheduler_stats._llem_watched = latest  # type: ignore[attr-defined]
    processor.update_scheduler_stats = update_scheduler_stats
    return latest

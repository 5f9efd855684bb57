"""vLLM's engine steps: what its stat logger reports each step (``StatLoggerBase.record``, called
in llem's process once per engine step as the step's outputs arrive) joined with the outputs of
that step per request (the engine's output processor, watched by ``watch_outputs``).

A step's ``end_s`` is ``time.perf_counter`` when its statistics arrive (the clock of the request
timelines), not the engine core's own step end; its start is the core's model-execution time
(``SchedulerIterationDetails.elapsed_ms``, with ``enable_logging_iteration_details``) earlier. The
shares: each request's produced tokens in the step, and its whole prefill (prompt less prefix-cache
hits) in the step of its first output. Under chunked prefill a prompt's earlier chunks count in
their own steps' ``prefill_tokens`` but in no share (the engine reports no output for them).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.backends.types import EngineStep, StepShare

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
    from it (None where the step delivered no outputs: the engine does not say who ran)."""

    step: EngineStep
    made: tuple[tuple[str, int], ...] | None


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
        made = self._made.pop(id(iteration_stats), None) if iteration_stats is not None else None
        step = engine_step(scheduler_stats, iteration_stats, time.perf_counter())
        if step is None:
            return
        if self.steps and step.start_s is not None:
            step.start_s = max(step.start_s, self.steps[-1].step.end_s)
        known = made is not None and self.broken is None
        self.steps.append(LoggedStep(step, tuple(made) if known and made is not None else None))


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
    logged: Sequence[LoggedStep], ids: dict[str, int], prefill: dict[int, int]
) -> list[EngineStep]:
    """The steps with each request's share: its produced tokens, and its whole prefill
    (``prefill``: prompt tokens less prefix-cache hits) in the step of its first output. Engine
    ids map to llem's through ``ids`` (vLLM appends ``-<suffix>`` to the ids it is given)."""
    seen: set[int] = set()
    out = []
    for ls in logged:
        if ls.made is None:
            out.append(ls.step)
            continue
        shares = []
        for name, n in ls.made:
            rid = ids.get(name, ids.get(name.rsplit("-", 1)[0], -1))
            first = rid not in seen
            seen.add(rid)
            shares.append(StepShare(rid, prefill.get(rid, 0) if first else 0, n))
        out.append(dataclasses.replace(ls.step, shares=tuple(shares)))
    return out


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


#: How the offline engine's step times are taken (``BatchOutput.step_clock``).
OFFLINE_CLOCK = (
    "time.perf_counter in llem's process: a step ends when LLMEngine.step() returned its outputs "
    "(the engine core runs in its own process, so that is when they reached llem) and starts "
    "where the previous step ended (the first at the batch's start)"
)


class OfflineSteps:
    """The offline engine's steps as llem steps it (``LLMEngine.step``): each call that returned
    outputs is a step, with the tokens each request (its index in the batch) got from it."""

    def __init__(self, start_s: float) -> None:
        self._last = start_s
        self._raw: list[tuple[float, float, tuple[tuple[int, int], ...]]] = []

    def step(self, now: float, made: Sequence[tuple[int, int]]) -> None:
        if made:
            self._raw.append((self._last, now, tuple(made)))
            self._last = now

    def engine_steps(self, prefill: Sequence[int]) -> list[EngineStep]:
        """The steps, each request's whole ``prefill`` (prompt less prefix-cache hits) in the
        step of its first output."""
        seen: set[int] = set()
        out = []
        for start, end, made in self._raw:
            shares = []
            for i, n in made:
                shares.append(StepShare(i, 0 if i in seen else prefill[i], n))
                seen.add(i)
            out.append(EngineStep.of_shares(start, end, shares))
        return out

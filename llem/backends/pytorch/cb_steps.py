"""The steps of transformers' continuous batching, recorded by wrapping its batch processor.

transformers (5.17 to 5.23 checked) exposes no per-step hook, but its manager's generation loop
runs each step through three methods of one ``ContinuousBatchProcessor`` (the manager's
``batch_processor``, built by ``manager.warmup()`` and kept across ``start``):

- ``scheduler.schedule_batch(...)`` returns the scheduled requests (``FutureRequestState``: the
  request's state, ``query_length`` tokens to compute, ``has_new_token``);
- ``prepare_next_batch()`` returns True when it prepared a batch (and advances each request's
  ``position_offset`` by its ``query_length``);
- ``update_batch()`` takes the oldest batch's sampled tokens into the requests (appending to
  ``generated_tokens``) and hands them to the requests' streams. Under async batching
  (double-buffered IO, chosen on CUDA with CUDA graphs) the batch it updates is the one before
  the batch just prepared.

``StepRecorder.attach`` wraps these three as instance attributes (the classes stay untouched).
A step starts when ``prepare_next_batch`` began preparing it, or when the previous step ended if
that is later (async batching prepares a batch while the previous one still runs), and ends
when ``update_batch`` has handed its tokens on. Each request's share: the prompt tokens the step
computed (``query_length`` up to the prompt's end, chunked prefill included) and the tokens it
produced (``generated_tokens`` growth, the first token of a prefill included). Should a
transformers version lack any of these, ``attach`` returns the reason and the run records no
steps; a failure inside the wrappers stops the recording (with the reason), never generation.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CLOCK = (
    "time.perf_counter in transformers' continuous-batching thread: a step starts when its batch "
    "began to be prepared (or when the previous step ended, if later: async batching prepares a "
    "batch while the previous one runs) and ends when its tokens were handed to the requests' "
    "streams"
)
_SETTLE_S = 5.0


@dataclass(frozen=True)
class RawStep:
    """One recorded step: request names (the manager's request ids) with their tokens."""

    start_s: float
    end_s: float
    shares: tuple[tuple[str, int, int], ...]  # (request name, prefill tokens, produced tokens)


@dataclass
class _Prepared:
    start_s: float
    states: list[Any]
    prefill: list[int]


class StepRecorder:
    """Records every step of one manager's batch processor (see the module docstring)."""

    def __init__(self) -> None:
        self.broken: str | None = None  # why recording stopped
        self._steps: list[RawStep] = []
        self._pending: deque[_Prepared] = deque()
        self._scheduled: Any = None
        self._last_end = float("-inf")
        self._updating = False
        self._cond = threading.Condition()

    # ----------------------------------------------------------------- attaching
    @classmethod
    def attach(cls, manager: Any) -> StepRecorder | str:
        """Wrap ``manager.batch_processor``'s step methods; or say why they cannot be."""
        processor: Any = getattr(manager, "batch_processor", None)
        scheduler: Any = getattr(processor, "scheduler", None)
        needed = {
            "batch_processor.prepare_next_batch": processor,
            "batch_processor.update_batch": processor,
            "batch_processor.scheduler.schedule_batch": scheduler,
        }
        missing = [k for k, o in needed.items() if not callable(getattr(o, k.split(".")[-1], None))]
        if missing:
            return (
                "this transformers' continuous batching has no " + ", ".join(missing) + " to "
                "record its steps from"
            )
        rec = cls()
        scheduler.schedule_batch = rec._wrap_schedule(scheduler.schedule_batch)
        processor.prepare_next_batch = rec._wrap_prepare(processor.prepare_next_batch)
        processor.update_batch = rec._wrap_update(processor.update_batch)
        return rec

    def _wrap_schedule(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def schedule_batch(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            self._scheduled = out
            return out

        return schedule_batch

    def _wrap_prepare(self, original: Callable[..., bool]) -> Callable[..., bool]:
        def prepare_next_batch(*args: Any, **kwargs: Any) -> bool:
            start = time.perf_counter()
            self._scheduled = None
            ready = original(*args, **kwargs)
            if ready and self.broken is None:
                self._guard(self._prepared, start)
            return ready

        return prepare_next_batch

    def _wrap_update(self, original: Callable[..., None]) -> Callable[..., None]:
        def update_batch(*args: Any, **kwargs: Any) -> None:
            with self._cond:
                self._updating = True
            try:
                batch = self._pending.popleft() if self._pending else None
                before: list[int] = []
                if batch is not None and self.broken is None:
                    self._guard(lambda: before.extend(_produced(batch.states)))
                original(*args, **kwargs)
                if batch is not None and self.broken is None:
                    self._guard(self._updated, batch, before)
            finally:
                with self._cond:
                    self._updating = False
                    self._cond.notify_all()

        return update_batch

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        """Run a recording action; a failure stops the recording, never the generation."""
        try:
            fn(*args)
        except Exception as exc:  # an internal of transformers changed shape
            self.broken = (
                f"recording continuous-batching steps failed ({type(exc).__name__}: {exc}); "
                "this transformers version changed what llem reads"
            )

    # ----------------------------------------------------------------- recording
    def _prepared(self, start: float) -> None:
        batch = self._scheduled[0]
        states, prefill = [], []
        for future in batch:
            state, q = future.state, int(future.query_length)
            past = int(state.position_offset) - q  # prepare_next_batch advanced it by q
            prompt = len(state.initial_tokens)
            prefill.append(max(0, min(past + q, prompt) - max(past, 0)))
            states.append(state)
        self._pending.append(_Prepared(start, states, prefill))
        if len(self._pending) > 2:  # a batch whose update never came (an error): drop it
            self._pending.popleft()

    def _updated(self, batch: _Prepared, before: list[int]) -> None:
        end = time.perf_counter()
        after = _produced(batch.states)
        shares = tuple(
            (str(s.request_id), p, a - b)
            for s, p, a, b in zip(batch.states, batch.prefill, after, before, strict=True)
        )
        step = RawStep(max(batch.start_s, self._last_end), end, shares)
        self._last_end = end
        with self._cond:
            self._steps.append(step)

    # ------------------------------------------------------------------- reading
    def take(self) -> list[RawStep]:
        """The steps recorded since the last ``take`` (after any step being recorded ends)."""
        with self._cond:
            self._cond.wait_for(lambda: not self._updating, timeout=_SETTLE_S)
            steps, self._steps = self._steps, []
        return steps


def _produced(states: list[Any]) -> list[int]:
    return [len(s.generated_tokens) for s in states]

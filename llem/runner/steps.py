"""The engine's steps in the measured window: ``steps.csv`` and the engine's running batch
(``concurrency.engine_running_mean/max``, ``concurrency.engine_step_clock``), for every engine and
traffic kind: a served workload's steps (``ServeOutput.steps``), or the steps of the window's
``generate`` batches (``llem.figures.engine_steps``).

A step belongs to the window when it ends inside it; a step that began before the window starts
at the window's start. ``window_steps`` is what the energy attribution reads; ``write_window_steps``
takes each step's attributed energy when there is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llem.figures.engine_steps import steps_from_batches
from llem.result import RunResult, StepRecord, write_steps
from llem.vocabulary.workload import BatchOutput, EngineStep, ServeOutput

NO_STEPS_SERVED = "the engine exposes no per-step record"
NO_STEP_IN_WINDOW = "no engine step ended inside the measured window"
_RUNNING = ("concurrency.engine_running_mean", "concurrency.engine_running_max")


@dataclass(frozen=True)
class WindowSteps:
    """The engine steps that ended in the window (None: the engine gives none, ``clock`` says
    why), with starts clipped to the window; ``clock`` says how their times were taken."""

    steps: list[EngineStep] | None
    clock: str
    start_s: float
    end_s: float
    shares_estimated: str | None = None  # why the steps' request shares are an estimate


def window_steps(
    served: ServeOutput | None, outputs: Sequence[BatchOutput], t0: float, t1: float
) -> WindowSteps:
    """The run's engine steps inside the window [t0, t1] (perf_counter seconds)."""
    if served is not None:
        steps, clock = served.steps, served.step_clock or NO_STEPS_SERVED
        estimated = served.shares_estimated
    else:
        steps, clock = steps_from_batches(outputs)
        estimated = next((o.shares_estimated for o in outputs if o.shares_estimated), None)
    if steps is None:
        return WindowSteps(None, clock, t0, t1)
    inside = [_clipped(s, t0) for s in steps if t0 <= s.end_s <= t1]
    return WindowSteps(inside, clock, t0, t1, estimated)


def _clipped(step: EngineStep, t0: float) -> EngineStep:
    if step.start_s is None or step.start_s >= t0:
        return step
    return EngineStep(
        step.end_s, step.running, step.prefill_tokens, step.decode_tokens, t0, step.shares
    )


def fill_engine_steps(
    result: RunResult,
    ws: WindowSteps,
    run_dir: Path,
    energy_j: Sequence[float | None] | None = None,
) -> None:
    """steps.csv (with each step's ``energy_j`` where given, in the order of ``ws.steps``) and
    the engine's running batch over the window; null with the reason where there are no steps."""
    conc = result.concurrency
    if ws.steps is None:
        if conc is not None:
            result.null_reasons["concurrency.engine_step_clock"] = ws.clock
            for key in _RUNNING:
                result.null_reasons[key] = ws.clock
        return
    if conc is not None:
        conc.engine_step_clock = ws.clock
    if not ws.steps:
        if conc is not None:
            for key in _RUNNING:
                result.null_reasons[key] = NO_STEP_IN_WINDOW
        return
    write_window_steps(run_dir, ws, energy_j)
    if conc is not None:
        conc.engine_running_max = max(s.running for s in ws.steps)
        mean = running_mean(ws.steps)
        if mean is None:
            result.null_reasons["concurrency.engine_running_mean"] = "fewer than two engine steps"
        conc.engine_running_mean = mean


def write_window_steps(
    run_dir: Path, ws: WindowSteps, energy_j: Sequence[float | None] | None = None
) -> None:
    """steps.csv from the window's steps, times from the window's start."""
    steps = ws.steps or []
    energies = list(energy_j) if energy_j is not None else [None] * len(steps)
    if len(energies) != len(steps):
        raise ValueError(f"{len(energies)} step energies for {len(steps)} steps")
    write_steps(
        run_dir,
        [
            StepRecord(
                end_s=_rel(s.end_s, ws.start_s),
                running=s.running,
                prefill_tokens=s.prefill_tokens,
                decode_tokens=s.decode_tokens,
                start_s=None if s.start_s is None else _rel(s.start_s, ws.start_s),
                shares=s.shares,
                energy_j=e,
            )
            for s, e in zip(steps, energies, strict=True)
        ],
    )


def running_mean(steps: Sequence[EngineStep]) -> float | None:
    """The running batch weighted by each step's duration: start to end, or the previous step's
    end to its end where the engine gives no start (the first such step has no duration)."""
    spans = []
    for i, s in enumerate(steps):
        start = s.start_s if s.start_s is not None else (steps[i - 1].end_s if i else None)
        if start is not None:
            spans.append((s.end_s - start, s.running))
    total = sum(d for d, _ in spans)
    if total <= 0:
        return None
    return round(sum(d * r for d, r in spans) / total, 4)


def _rel(t: float, t0: float) -> float:
    return round(t - t0, 6)

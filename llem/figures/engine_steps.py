"""Engine steps of ``generate`` batches, so that every run has steps (``steps.csv``).

A static PyTorch batch (``generate``) runs one prefill step, from the batch's start to its first
tokens reaching the host, in which every request prefills its input tokens and produces its first
token, then decode steps, each from the previous step's tokens to its own, in which every request
that has not finished produces its tokens (1 a step, more with prompt lookup). A finished request
drops out of the steps (its padded row still runs in the batch: that work stays in the step,
shared by the requests still in it). With beam search every beam prefills and decodes, so a
request's tokens count every beam (as ``llem.figures.compute`` does).

Engines that schedule a batch themselves (vLLM's offline engine) report their own steps in
``BatchOutput.steps``; request ids are renumbered in the order of the run's requests (as
``llem.figures.timelines`` numbers them for requests.jsonl).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from llem.vocabulary.workload import BatchOutput, EngineStep, StepShare

STATIC_CLOCK = (
    "time.perf_counter in llem's process: a static batch's prefill step runs from the generate() "
    "call to its first tokens reaching the host, each decode step from the previous step's tokens "
    "to its own (transformers' streamer; a logits processor under beam search)"
)
NO_BATCH_STEPS = "the engine exposed no per-step record of its batches"


def steps_from_batches(
    batches: Sequence[BatchOutput],
) -> tuple[list[EngineStep] | None, str]:
    """Every batch's steps with run-wide request ids, and how their times were taken (clocks of
    different batches joined by "; "); or None and why there are none."""
    steps: list[EngineStep] = []
    clocks: list[str] = []
    first = 0
    for b in batches:
        if b.steps is not None:
            steps.extend(_renumbered(b.steps, first))
            clock = b.step_clock or "not stated by the engine"
        elif b.request_step_times_s is None:
            steps.extend(static_steps(b, first))
            clock = STATIC_CLOCK
        else:
            return None, b.step_clock or NO_BATCH_STEPS
        if clock not in clocks:
            clocks.append(clock)
        first += len(b.input_tokens)
    return steps, "; ".join(clocks)


def static_steps(batch: BatchOutput, first_id: int = 0) -> list[EngineStep]:
    """One static batch's steps (see the module docstring); request i is ``first_id + i``."""
    beams = max(1, batch.num_beams)
    left = list(batch.output_tokens)
    times = batch.step_times_s or [batch.end_s]  # no step clock: one step, prefill only
    tokens = batch.step_tokens if batch.step_times_s else [0]
    starts = [batch.start_s, *times[:-1]]
    out = []
    for j, (start, end) in enumerate(zip(starts, times, strict=True)):
        shares = []
        for i, n_in in enumerate(batch.input_tokens):
            made = min(left[i], tokens[j])
            left[i] -= made
            prefill = n_in if j == 0 else 0
            if prefill or made:
                shares.append(StepShare(first_id + i, prefill * beams, made * beams))
        out.append(EngineStep.of_shares(start, end, shares))
    return out


def _renumbered(steps: Sequence[EngineStep], first: int) -> list[EngineStep]:
    if first == 0:
        return list(steps)
    return [
        dataclasses.replace(
            s,
            shares=None
            if s.shares is None
            else tuple(dataclasses.replace(x, request_id=x.request_id + first) for x in s.shares),
        )
        for s in steps
    ]

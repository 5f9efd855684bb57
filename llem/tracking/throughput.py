"""The engine's throughput over the window: tokens per second in consecutive bins of fixed
length, from its steps (``steps.csv``). Pure: no file read, no tracker imported.

- **Axis**: seconds from the window's start, the clock of ``steps.csv`` and ``timeseries.csv``
  alike, so a rate lines up with the power readings of the same moment.
- **Bins**: ``[0, b), [b, 2b), ...`` up to the window's end; ``b`` is ``MIN_BIN_S`` (1 s), or the
  timeline's own sampling interval where that is coarser (a rate finer than the power it is read
  beside would suggest a resolution the timeline does not have). The last bin ends at the
  window's end and is divided by its real length.
- **A step's tokens** are spread over the bins in proportion to its time inside each. A step
  spans its ``start_s`` to its ``end_s``; without a start it begins where the previous step
  ended (``steps.csv``'s own rule); the first step without a start is an instant at its end.
  An instant's tokens fall in the bin that holds its end (an end on a bin's edge belongs to the
  bin it closes).
- **Unknown is never 0**: a bin that a step with an unknown count (an empty cell) overlaps has
  no rate; a phase with no count at all has no history, with the reason. A bin no step overlaps
  is a rate of 0: steps.csv holds every engine step of the window, so the engine produced
  nothing then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from llem.result import StepRecord

MIN_BIN_S = 1.0
PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class PhaseRates:
    """One phase's rates: ``(bin start s, tokens per s)`` for each bin with a known count, or
    no rates and the reason."""

    rates: tuple[tuple[float, float], ...]
    null_reason: str | None = None


def bin_s(sampling_interval_s: float | None) -> float:
    """The bins' length: 1 s, or the timeline's sampling interval where that is coarser."""
    return max(MIN_BIN_S, sampling_interval_s or 0.0)


def step_times(steps: Sequence[StepRecord]) -> list[tuple[float, float]]:
    """Each step's ``(start, end)`` in seconds from the window's start (see the module)."""
    out = []
    for i, s in enumerate(steps):
        start = s.start_s if s.start_s is not None else (steps[i - 1].end_s if i else s.end_s)
        out.append((min(max(start, 0.0), s.end_s), s.end_s))
    return out


def _edges(end_s: float, length_s: float) -> list[float]:
    n = max(1, math.ceil(end_s / length_s - 1e-9))
    return [k * length_s for k in range(n)] + [end_s]


def _bins_of(
    start: float, end: float, edges: list[float], length_s: float
) -> list[tuple[int, float]]:
    """The bins ``[start, end]`` falls in, with the share of it inside each (bin ``k`` starts
    at ``k * length_s``: only the bins from the start's to the end's are looked at)."""
    last = len(edges) - 2
    closes = min(max(math.ceil(end / length_s) - 1, 0), last)  # the bin whose end ``end`` is
    if end <= start:  # an instant: the bin its end closes
        return [(closes, 1.0)]
    out = []
    for k in range(min(int(start // length_s), closes), closes + 1):
        inside = min(end, edges[k + 1]) - max(start, edges[k])
        if inside > 0:
            out.append((k, inside / (end - start)))
    return out


def phase_rates(
    steps: Sequence[StepRecord], phase: str, end_s: float, length_s: float
) -> PhaseRates:
    """Tokens per second of ``phase`` (``prefill`` or ``decode``) over bins of ``length_s`` from
    0 to ``end_s`` (the window's end; at least the last step's end)."""
    counts = [getattr(s, f"{phase}_tokens") for s in steps]
    if not steps:
        return PhaseRates((), "steps.csv holds no engine step")
    if all(c is None for c in counts):
        return PhaseRates((), f"steps.csv gives no {phase} token counts")
    end_s = max(end_s, max(s.end_s for s in steps))
    if end_s <= 0:
        return PhaseRates((), "the window has no length")
    edges = _edges(end_s, length_s)
    tokens = [0.0] * (len(edges) - 1)
    unknown = [False] * len(tokens)
    for (start, end), count in zip(step_times(steps), counts, strict=True):
        for k, share in _bins_of(start, end, edges, length_s):
            if count is None:
                unknown[k] = True
            else:
                tokens[k] += count * share
    rates = tuple(
        (edges[k], tokens[k] / (edges[k + 1] - edges[k]))
        for k in range(len(tokens))
        if not unknown[k] and edges[k + 1] > edges[k]
    )
    return PhaseRates(rates)

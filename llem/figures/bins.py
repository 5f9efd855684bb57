"""Intervals a power timeline can resolve: consecutive spans of a window (engine steps and the
gaps between them) grouped until each group lasts at least ``interval_s`` (two to four times
the timeline's resolution), and the worst-case error of any figure that is a weighted sum of the
groups' energies.

A timeline whose resolution ``r`` (the largest gap between power samples or between refreshes
of the sensor's readings, plus the readings' averaging length) is coarser than an engine step
smooths the steps' energies: a step's energy read off it is partly its neighbours'. An interval
holds its own energy but for what the timeline may move across its two edges, so fitting and
splitting over intervals loses no information the timeline has, while fitting over the steps fits
the smoothing. The energy moved across the edges still blurs the intervals' contrast (an
interval heavy in prefill reads lighter, its neighbours heavier), which pulls the fitted costs
toward their mean, by a fraction that falls as the intervals lengthen, while fewer intervals
leave the fit fewer degrees of freedom. On the truth harness (``bench/attribution.py``, 20 s
windows, 6 seeds at 10 Hz, the sensor's refresh grid at a random phase) prefill came out 5-9 %
low with intervals of ``2 r`` and the 95 % intervals held 88 % of the truths; at ``4 r`` the
error was 1-7 % and they held 99 %. So an interval lasts ``4 r`` where the window holds
``MIN_INTERVALS`` such intervals, and as long as leaves it that many down to ``2 r`` in shorter
windows (about 12 s at 10 Hz). Where ``r`` is finer than the spans (a replayed trace: ``r =
0``), every span is its own interval.

The bound (``linear_bound``): a figure ``F = sum_i w_i E_i`` over the intervals' energies ``E_i``
is off by the energy moved across each edge ``j`` between interval ``j - 1`` and ``j`` (at most
``edge_j``: the timeline's power range times ``r``), which leaves one and enters the other, so
it moves ``F`` by ``|w_{j-1} - w_j| x edge_j`` (``w`` is 0 outside the window's intervals), plus
each interval's own timing error apart from its edges (``rest_i``: the trapezoid bound of the
samples inside it and the counter scaling's part), ``|w_i| x rest_i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MIN_RESOLUTIONS = 2.0  # an interval lasts at least this many timeline resolutions,
LONG_RESOLUTIONS = 4.0  # and up to this many where the window holds enough of them:
MIN_INTERVALS = 30  # intervals of the window the fit keeps before it lengthens them


@dataclass(frozen=True)
class Bins:
    """Spans grouped into intervals: ``groups[k] = (first, end)`` (span indices, end excluded),
    each interval's energy (J), its timing bound apart from its edges, and the bound of the
    energy moved across each of its ``len(groups) + 1`` edges."""

    groups: tuple[tuple[int, int], ...]
    energy_j: tuple[float, ...]
    rest_bound_j: tuple[float, ...]
    edge_bound_j: tuple[float, ...]
    resolution_s: float
    min_s: float = 0.0  # the length the spans were grouped to (``interval_s``)


def interval_s(resolution_s: float, window_s: float) -> float:
    """How long a window's intervals last at least (module docstring): ``LONG_RESOLUTIONS``
    resolutions where the window holds ``MIN_INTERVALS`` of them, else as many as it does, never
    fewer than ``MIN_RESOLUTIONS``."""
    if resolution_s <= 0:
        return 0.0
    fits = window_s / (MIN_INTERVALS * resolution_s)
    return resolution_s * max(MIN_RESOLUTIONS, min(LONG_RESOLUTIONS, fits))


def group(durations_s: Sequence[float], min_s: float) -> list[tuple[int, int]]:
    """Consecutive spans grouped until each group lasts ``min_s`` or more; a short remainder
    joins the last group."""
    out: list[tuple[int, int]] = []
    first, length = 0, 0.0
    for i, d in enumerate(durations_s):
        length += d
        if length >= min_s:
            out.append((first, i + 1))
            first, length = i + 1, 0.0
    if first < len(durations_s):
        if out:
            out[-1] = (out[-1][0], len(durations_s))
        else:
            out.append((first, len(durations_s)))
    return out


def per_span(energy_j: Sequence[float], timing_bound_j: Sequence[float]) -> Bins:
    """Every span its own interval, its whole timing bound its own (no tie between spans)."""
    n = len(energy_j)
    return Bins(
        tuple((i, i + 1) for i in range(n)),
        tuple(energy_j),
        tuple(timing_bound_j),
        (0.0,) * (n + 1),
        0.0,
    )


def linear_bound(weights: Sequence[float], bins: Bins) -> float:
    """The worst-case timing error (J) of ``sum_i weights[i] x bins.energy_j[i]`` (module
    docstring)."""
    w = [0.0, *weights, 0.0]
    edges = sum(abs(w[j] - w[j + 1]) * e for j, e in enumerate(bins.edge_bound_j))
    return edges + sum(abs(x) * r for x, r in zip(weights, bins.rest_bound_j, strict=True))


def sparse_bound(weights: dict[int, float], bins: Bins) -> float:
    """``linear_bound`` of weights given only where they are not 0 (interval -> weight)."""
    edges = {j for i in weights for j in (i, i + 1)}
    moved = sum(
        abs(weights.get(j - 1, 0.0) - weights.get(j, 0.0)) * bins.edge_bound_j[j] for j in edges
    )
    return moved + sum(abs(x) * bins.rest_bound_j[i] for i, x in weights.items())

"""The energy of consecutive spans of a measured window (engine steps and the gaps between them),
each with a bound that grows when the power timeline is coarse compared with the spans.

``span_energies(window, edges)`` cuts ``[edges[0], edges[-1]]`` (session-clock seconds, inside the
window) at ``edges`` and gives each span its joules, summed over the window's devices:

* ``replay``: the trace's exact integral over the span (bound: float rounding);
* ``nvml_counter``: the sampled power timeline (the piecewise-linear curve through the samples,
  as ``integrate_linear``) scaled so that its integral over the whole window equals the counter's
  delta; a span's energy is the integral of that timeline over the span;
* ``nvml_power``: the same integral, unscaled.

The spans add up to the energy over ``[edges[0], edges[-1]]`` exactly (the integrals telescope),
so over the whole window they add up to the window's energy.

The bound of one span of ``d`` seconds has two parts, kept apart because they act differently on
what is computed from the spans:

* ``timing_bound_j`` (``moved_j()``, the trapezoid, ``_scaling_j()``): the timeline places each
  sample interval's energy right but may misplace it in time by up to the timeline's resolution
  ``r`` (the largest gap between samples or, where that is longer, the counter's update period,
  ``SensorSpec.counter_update_s``: on NVML the 100 ms between refreshes of its readings; plus the
  averaging length of the readings), so at most ``R x min(d, 2r)``
  joules can move across the span's two edges, ``R`` being a range (peak minus minimum) of the
  scaled timeline (below); plus the trapezoid bound of the sample intervals wholly inside
  the span (``llem.measure.uncertainty``: power that changes between two samples); plus the part
  of the span's energy that the counter scaling added or removed (``|1 - 1/scale| x E``), whose
  place in time the samples do not show. ``R`` is the range the samples saw within ``2r`` of
  the span's edges (where energy can be moved across them) where a sample lies inside the span
  (its power was seen; power that spikes and falls back between two samples is missed, as by
  every sampled figure); where none does, the span's power was not seen at all,
  so ``R`` is the devices' power ceiling (their enforced power limits, ``ceiling_w``; the scaled
  peak sample where it is unknown): a timeline too coarse for the steps widens the bound instead
  of trusting the samples.
* ``scale_relative``: the window's own bound (counter resolution and update, sensor accuracy,
  trapezoid) as a fraction of its energy. It scales every span alike: it moves a span by at most
  ``scale_relative x E`` and leaves the spans' shares of each other unchanged.

``bound_j`` is their sum per span; ``edge_j`` is the part of ``timing_bound_j`` that is energy
moved across the span's edges (``R x min(d, 2r)``), which one span loses and its neighbour gains.

On NVML the readings themselves change only every ~100 ms: the energy counter is refreshed about
every 100 ms, and on A100/H100 the power sensor reports one reading per 100 ms window, averaged
over ~25 ms of it (arXiv 2312.02741). Sampling faster than that repeats readings; it does not
resolve shorter spans, so the resolution is never taken finer than the sensor's update period
(``SensorSpec.counter_update_s``). What the
sensor misses in the 75 % of each window it does not sample is not in these bounds
(``llem.measure.uncertainty``).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llem.measure.integrate import integrate_linear
from llem.measure.interval import _points
from llem.measure.meter import DeviceEnergy, WindowResult, is_counter
from llem.measure.power_source import PowerSource
from llem.measure.replay import ReplaySource

_EDGE_SLACK_S = 1e-9

SPAN_METHOD = (
    "step energy: the sampled power timeline scaled to the energy counter, integrated over each "
    "step; bound per step = (peak - minimum power) x min(step duration, 2 x timeline resolution) "
    "+ the counter scaling's part of it + the window's relative bound x its energy"
)


@dataclass(frozen=True)
class SpanEnergies:
    """Joules and worst-case bounds of consecutive spans; ``resolution_s``: the coarsest
    device's timeline resolution (0 for a replayed trace)."""

    energy_j: tuple[float, ...]
    timing_bound_j: tuple[float, ...]
    scale_relative: float
    resolution_s: float
    power_range_w: float
    method: str
    edge_j: tuple[float, ...] = ()  # the part of timing_bound_j moved across the span's edges

    @property
    def bound_j(self) -> tuple[float, ...]:
        return tuple(
            t + self.scale_relative * abs(e)
            for t, e in zip(self.timing_bound_j, self.energy_j, strict=True)
        )


@dataclass(frozen=True)
class _Timeline:
    cumulative: Callable[[float], float]  # J from the window's start to t
    inner: Callable[[float, float], float]  # trapezoid bound of the sample intervals inside
    resolution_s: float
    range_w: float
    scale: float
    window_bound_j: float
    window_j: float
    peak_w: float = 0.0  # the scaled peak sample
    seen: Callable[[float, float], bool] = lambda a, b: True  # a sample lies in [a, b]
    unseen_w: float = 0.0  # the range of a span no sample saw
    local_w: Callable[[float, float], float] | None = None  # the samples' range in [a, b]


def span_energies(
    window: WindowResult | None,
    edges: Sequence[float],
    *,
    source: PowerSource | None,
    unavailable_reason: str | None = None,
    ceiling_w: float | None = None,
) -> SpanEnergies | str:
    """The spans' energies and bounds (module docstring), or the reason they cannot be had.
    ``ceiling_w``: the most the devices together can draw (their power limits), if known."""
    why = _unavailable(window, edges, source, unavailable_reason)
    if why is not None:
        return why
    assert window is not None and source is not None
    lo, hi = max(edges[0], window.start_s), min(edges[-1], window.end_s)
    cut = [min(max(e, lo), hi) for e in edges]
    lines = []
    for d in window.devices:
        line = _timeline(window, d, source)
        if isinstance(line, str):
            return f"no energy for {d.uuid}: {line}"
        lines.append(line)
    lines = _with_ceiling(lines, ceiling_w)
    energy = [0.0] * (len(cut) - 1)
    bounds = [0.0] * (len(cut) - 1)
    edge = [0.0] * (len(cut) - 1)
    for line in lines:
        cum = [line.cumulative(t) for t in cut]
        for i in range(len(cut) - 1):
            joules = cum[i + 1] - cum[i]
            moved = moved_j(line, cut[i], cut[i + 1])
            energy[i] += joules
            bounds[i] += moved + _scaling_j(line, joules) + line.inner(cut[i], cut[i + 1])
            edge[i] += moved
    return SpanEnergies(
        tuple(energy),
        tuple(bounds),
        max(line.window_bound_j / line.window_j if line.window_j > 0 else 0.0 for line in lines),
        max(line.resolution_s for line in lines),
        sum(line.range_w for line in lines),
        SPAN_METHOD,
        tuple(edge),
    )


def _unavailable(
    window: WindowResult | None,
    edges: Sequence[float],
    source: PowerSource | None,
    unavailable_reason: str | None,
) -> str | None:
    if window is None:
        return "no measured window"
    if source is None or not window.devices:
        return f"energy unavailable: {unavailable_reason or 'no energy source'}"
    if window.failure is not None:
        return f"power source failed: {window.failure}"
    if len(edges) < 2 or any(b < a for a, b in zip(edges, edges[1:], strict=False)):
        return "no spans: the edges are fewer than 2 or not in time order"
    if edges[0] < window.start_s - _EDGE_SLACK_S or edges[-1] > window.end_s + _EDGE_SLACK_S:
        return (
            f"[{edges[0]:.6f}, {edges[-1]:.6f}] is not inside the measured window "
            f"[{window.start_s:.6f}, {window.end_s:.6f}]"
        )
    return None


def _with_ceiling(lines: list[_Timeline], ceiling_w: float | None) -> list[_Timeline]:
    """The timelines with the range an unseen span's power may have: the devices' share of the
    power ceiling (the scaled peak sample where it is unknown)."""
    share = ceiling_w / len(lines) if ceiling_w else 0.0
    return [dataclasses.replace(x, unseen_w=max(share, x.peak_w)) for x in lines]


def moved_j(line: _Timeline, a: float, b: float) -> float:
    """The energy the timeline may move across the edges of ``[a, b]`` (module docstring)."""
    if not line.seen(a, b):
        return line.unseen_w * min(b - a, 2 * line.resolution_s)
    power_range = line.range_w
    if line.local_w is not None:  # what the samples near its edges show
        r = line.resolution_s
        power_range = max(line.local_w(a - 2 * r, a + 2 * r), line.local_w(b - 2 * r, b + 2 * r))
    return power_range * min(b - a, 2 * line.resolution_s)


def _scaling_j(line: _Timeline, joules: float) -> float:
    """What scaling the samples to the counter may misplace of a span's ``joules``."""
    return abs(1.0 - 1.0 / line.scale) * abs(joules) if line.scale > 0 else 0.0


def _timeline(window: WindowResult, d: DeviceEnergy, source: PowerSource) -> _Timeline | str:
    if d.energy_j is None:
        return d.null_reason or "not measured"
    bound = d.uncertainty_j or 0.0
    if d.method == "replay" and isinstance(source, ReplaySource) and d.uuid in source.traces:
        trace, origin = source.traces[d.uuid], source.origin_s

        def exact(t: float) -> float:
            return trace.energy_until(t - origin)

        return _Timeline(exact, _no_inner, 0.0, 0.0, 1.0, bound, d.energy_j)
    times, watts = _points(window, d.uuid)
    if len(times) < 2:
        return "fewer than 2 power samples in the window"
    start = window.start_s
    whole = integrate_linear(times, watts, start, window.end_s)
    scaled = is_counter(d.method)
    if scaled and whole <= 0:
        return "the sampled power integrates to 0 J over the window"
    scale = d.energy_j / whole if scaled else 1.0
    cumulative = _cumulative(times, watts, start, scale)
    gaps = [b - a for a, b in zip([start, *times], [*times, window.end_s], strict=False)]
    spec = source.sensor(d.uuid)
    refresh = 0.0 if spec is None else spec.counter_update_s
    averaging = 0.0 if spec is None else spec.power_averaging_s
    resolution = max(max(gaps), refresh) + averaging
    return _Timeline(
        cumulative,
        _inner_trapezoid(times, watts, scale),
        resolution,
        scale * (max(watts) - min(watts)),
        scale,
        bound,
        d.energy_j,
        scale * max(watts),
        _seen(times),
        local_w=_local_range(times, [scale * w for w in watts]),
    )


def _local_range(times: Sequence[float], watts: Sequence[float]) -> Callable[[float, float], float]:
    """(a, b) -> the range of the samples in [a, b], with the samples on either side of it (the
    timeline between them reaches into it)."""

    def local(a: float, b: float) -> float:
        lo = max(bisect.bisect_left(times, a) - 1, 0)
        hi = min(bisect.bisect_right(times, b) + 1, len(times))
        near = watts[lo:hi]
        return max(near) - min(near) if near else 0.0

    return local


def _seen(times: Sequence[float]) -> Callable[[float, float], bool]:
    def seen(a: float, b: float) -> bool:
        return bisect.bisect_left(times, a) < bisect.bisect_right(times, b)

    return seen


def _no_inner(a: float, b: float) -> float:
    return 0.0


def _inner_trapezoid(
    times: Sequence[float], watts: Sequence[float], scale: float
) -> Callable[[float, float], float]:
    """(a, b) -> the scaled trapezoid bound of the sample intervals inside [a, b]."""
    prefix = [0.0]
    for i in range(len(times) - 1):
        step = abs(watts[i + 1] - watts[i]) * (times[i + 1] - times[i]) / 2
        prefix.append(prefix[-1] + step)

    def inside(a: float, b: float) -> float:
        first = bisect.bisect_left(times, a)  # the first sample at or after a
        last = bisect.bisect_right(times, b) - 1  # the last sample at or before b
        return scale * (prefix[last] - prefix[first]) if last > first else 0.0

    return inside


def _cumulative(
    times: Sequence[float], watts: Sequence[float], start: float, scale: float
) -> Callable[[float], float]:
    """t -> scaled integral of the curve from ``start`` to t, in O(log n) per call."""
    ts = [start, *times]
    ws = [watts[0], *watts]
    cum = [0.0]
    for i in range(1, len(ts)):
        cum.append(cum[-1] + (ws[i - 1] + ws[i]) / 2 * (ts[i] - ts[i - 1]))

    def at(t: float) -> float:
        if t <= start:
            return 0.0
        i = bisect.bisect_right(ts, t) - 1
        if i >= len(ts) - 1:
            return scale * (cum[-1] + ws[-1] * (t - ts[-1]))
        return scale * (cum[i] + integrate_linear(ts[i : i + 2], ws[i : i + 2], ts[i], t))

    return at

"""Energy between two instants of a measured window (a steady state's edges), with its bound.

The window's energy is read at its edges; an instant inside it was not read, so the energy of a
sub-interval ``[t0, t1]`` (session-clock seconds, ``time.perf_counter`` on a real run) comes from
the window's record, per device:

* ``replay``: the trace's exact integral over ``[t0, t1]`` (bound: float rounding);
* ``nvml_counter``: the sampled power integrated over ``[t0, t1]`` (the piecewise-linear curve
  through the samples, as ``integrate_linear``) and scaled by ``counter delta / the same
  integral over the whole window``, so the sub-intervals of a window add up to the counter's
  energy. Bound: the trapezoid bound of the samples inside, scaled; the averaging lag of the power
  readings at both inner edges; the counter's own resolution and update bound, in the
  sub-interval's share of the window's energy; and the sensor's accuracy over the sub-interval;
* ``nvml_power``: the same integral, unscaled, with the bound of ``sampled_components``.

A device without energy makes the figure null with its reason; so does a window without an energy
source, or an interval outside the window.
"""

from __future__ import annotations

from collections.abc import Sequence

from llem.measure import uncertainty
from llem.measure.integrate import integrate_linear
from llem.measure.meter import DeviceEnergy, WindowResult, is_counter
from llem.measure.power_source import PowerSource
from llem.measure.replay import ReplaySource
from llem.result import Figure

# perf_counter readings of the same instant may differ in the last bits across threads
_EDGE_SLACK_S = 1e-9


def interval_energy(
    window: WindowResult | None,
    t0: float,
    t1: float,
    *,
    source: PowerSource | None,
    unavailable_reason: str | None = None,
) -> Figure:
    """Joules over ``[t0, t1]`` of ``window``, summed over its devices, with the bound (see the
    module docstring); null with the reason when they cannot be had."""
    if window is None:
        return Figure.null("no measured window")
    if source is None or not window.devices:
        return Figure.null(f"energy unavailable: {unavailable_reason or 'no energy source'}")
    if window.failure is not None:
        return Figure.null(f"power source failed: {window.failure}")
    if not (window.start_s - _EDGE_SLACK_S <= t0 < t1 <= window.end_s + _EDGE_SLACK_S):
        return Figure.null(
            f"[{t0:.6f}, {t1:.6f}] is not a span inside the measured window "
            f"[{window.start_s:.6f}, {window.end_s:.6f}]"
        )
    t0, t1 = max(t0, window.start_s), min(t1, window.end_s)
    parts = [_device(window, d, t0, t1, source) for d in window.devices]
    missing = [
        f"{d.uuid}: {f.null_reason}"
        for d, f in zip(window.devices, parts, strict=True)
        if f.value is None
    ]
    if missing:
        return Figure.null("no energy for " + "; ".join(missing))
    bounds = [f.bound for f in parts]
    total = sum(float(f.value) for f in parts)
    if any(b is None for b in bounds):
        return Figure(total, bound_null_reason="a device's bound is unknown")
    return Figure(total, sum(b for b in bounds if b is not None))


def _device(
    window: WindowResult, d: DeviceEnergy, t0: float, t1: float, source: PowerSource
) -> Figure:
    if d.energy_j is None:
        return Figure.null(d.null_reason or "not measured")
    if d.method == "replay" and isinstance(source, ReplaySource) and d.uuid in source.traces:
        trace = source.traces[d.uuid]
        joules = trace.energy_until(t1 - source.origin_s) - trace.energy_until(t0 - source.origin_s)
        return Figure(joules, uncertainty.replay_bound_j(joules))
    times, watts = _points(window, d.uuid)
    if len(times) < 2:
        return Figure.null("fewer than 2 power samples in the window")
    inside = integrate_linear(times, watts, t0, t1)
    whole = integrate_linear(times, watts, window.start_s, window.end_s)
    scaled = is_counter(d.method)
    spec = source.sensor(d.uuid)
    if spec is None:
        return Figure.null(f"{d.method} energy has no sensor figures to bound it")
    if scaled and whole <= 0:
        return Figure.null("the sampled power integrates to 0 J over the window")
    scale = d.energy_j / whole if scaled else 1.0
    joules = inside * scale
    parts = _inner_components(times, watts, t0, t1, spec.power_averaging_s)
    parts = {k: v * scale for k, v in parts.items()}
    parts["sensor_accuracy_j"] = uncertainty.sensor_bound_j(joules, t1 - t0, spec)
    if scaled and d.energy_j > 0:
        counter = sum(v for k, v in d.uncertainty_components.items() if k != "sensor_accuracy_j")
        parts["counter_share_j"] = counter * joules / d.energy_j
    return Figure(joules, uncertainty.combine(parts))


def _points(window: WindowResult, uuid: str) -> tuple[list[float], list[float]]:
    pts = sorted(
        (t, float(s.power_w))
        for t, group in window.ticks
        for s in group
        if s.device == uuid and s.power_w is not None
    )
    return [p[0] for p in pts], [p[1] for p in pts]


def _inner_components(
    times: Sequence[float], watts: Sequence[float], t0: float, t1: float, averaging_s: float
) -> dict[str, float]:
    """Trapezoid bound of the curve's pieces inside ``[t0, t1]`` (the edges interpolated) and the
    averaging lag of the readings at the two edges."""
    p0, p1 = _power_at(times, watts, t0), _power_at(times, watts, t1)
    inner = [(t, w) for t, w in zip(times, watts, strict=True) if t0 < t < t1]
    ts = [t0] + [t for t, _ in inner] + [t1]
    ws = [p0] + [w for _, w in inner] + [p1]
    return {
        "trapezoid_j": uncertainty.trapezoid_bound_j(ts, ws),
        "averaging_lag_j": uncertainty.averaging_lag_bound_j(p0, p1, averaging_s),
    }


def _power_at(times: Sequence[float], watts: Sequence[float], t: float) -> float:
    """The piecewise-linear curve's value at ``t`` (end values held outside)."""
    if t <= times[0]:
        return watts[0]
    if t >= times[-1]:
        return watts[-1]
    for i in range(len(times) - 1):
        if times[i] <= t <= times[i + 1]:
            span = times[i + 1] - times[i]
            if span <= 0:
                return watts[i + 1]
            return watts[i] + (watts[i + 1] - watts[i]) * (t - times[i]) / span
    return watts[-1]

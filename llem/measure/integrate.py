"""The exact integral of a piecewise-linear curve: the trapezoid rule over sampled power."""

from __future__ import annotations

import bisect
from collections.abc import Sequence


def integrate_linear(times: Sequence[float], values: Sequence[float], a: float, b: float) -> float:
    """Exact integral over [a, b] of the piecewise-linear curve through (times, values).

    Outside the first/last point the curve holds the end value. ``times`` must be non-decreasing;
    two points at the same time are a vertical step. With samples as the points this is the
    trapezoid rule, window edges included.
    """
    if not times or b <= a:
        return 0.0
    total = 0.0
    if a < times[0]:
        total += values[0] * (min(b, times[0]) - a)
    if b > times[-1]:
        total += values[-1] * (b - max(a, times[-1]))
    lo = max(bisect.bisect_right(times, a) - 1, 0)
    for i in range(lo, len(times) - 1):
        t0, t1 = times[i], times[i + 1]
        if t0 >= b:
            break
        if t1 <= a or t1 == t0:
            continue
        s, e = max(t0, a), min(t1, b)
        if e <= s:
            continue
        slope = (values[i + 1] - values[i]) / (t1 - t0)
        p_s = values[i] + slope * (s - t0)
        p_e = values[i] + slope * (e - t0)
        total += (p_s + p_e) / 2 * (e - s)
    return total

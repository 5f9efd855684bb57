"""A window's temperature rise per GPU: the rise from the window's start to its end of the
least-squares line through the GPU's temperature readings (with at least 3 of them), not the last
reading less the first, so that NVML's whole-degree readings do not move it by a degree on one
reading. It is recorded as ``thermal.temp_rise_c`` (``llem.measure.measurement``) and judged by
the ``temperature_steady`` check (``llem.measure.validity``).
"""

from __future__ import annotations

from collections.abc import Sequence

from llem.measure.meter import WindowResult


def temperature_rise_c(times_s: Sequence[float], temps_c: Sequence[float], span_s: float) -> float:
    """Rise over ``span_s`` of the least-squares line through (times, temperatures)."""
    n = len(times_s)
    mt, mc = sum(times_s) / n, sum(temps_c) / n
    var = sum((t - mt) ** 2 for t in times_s)
    if var <= 0:
        return 0.0
    slope = sum((t - mt) * (c - mc) for t, c in zip(times_s, temps_c, strict=True)) / var
    return slope * span_s


def temperature_rises_c(window: WindowResult) -> dict[str, float]:
    """Per device with at least 3 temperature readings, the fitted rise across the window (C)."""
    rises = {}
    for d in window.devices:
        pts = [
            (s.time_s, s.temperature_c)
            for s in window.samples
            if s.device == d.uuid and s.temperature_c is not None
        ]
        if len(pts) >= 3:
            rises[d.uuid] = temperature_rise_c(
                [p[0] for p in pts], [p[1] for p in pts], window.window_s
            )
    return rises

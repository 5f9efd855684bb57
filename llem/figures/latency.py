"""Latency figures shared by the result's sections: ``percentiles`` (p50, p90, p99 of any
samples; result.json's latency figures themselves come from ``llem.figures.serving``, vLLM
``bench serve``'s definitions) and ``decode_time_and_steps`` (the seconds and steps of decode
after each batch's first token)."""

from __future__ import annotations

from collections.abc import Iterable

from llem.vocabulary.workload import BatchOutput

PERCENTILES = (50, 90, 99)


def percentiles(values: Iterable[float], scale: float = 1.0) -> dict[str, float] | None:
    """``{"p50", "p90", "p99"}`` (linear interpolation), or None when there are no values."""
    data = sorted(v * scale for v in values)
    if not data:
        return None
    out = {}
    for q in PERCENTILES:
        pos = (len(data) - 1) * q / 100.0
        lo = int(pos)
        hi = min(lo + 1, len(data) - 1)
        out[f"p{q}"] = data[lo] + (data[hi] - data[lo]) * (pos - lo)
    return out


def decode_time_and_steps(batches: Iterable[BatchOutput]) -> tuple[float, int]:
    """Seconds spent in decode steps (after the first token) and how many such steps ran."""
    seconds, steps = 0.0, 0
    for b in batches:
        if len(b.step_times_s) > 1:
            seconds += b.step_times_s[-1] - b.step_times_s[0]
            steps += len(b.step_times_s) - 1
    return seconds, steps

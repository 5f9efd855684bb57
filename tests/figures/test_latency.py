from __future__ import annotations

import pytest

from llem.figures.latency import decode_time_and_steps, percentiles
from llem.vocabulary.workload import BatchOutput


def _batch(outputs, steps, tokens=None, start=0.0):
    return BatchOutput(
        start_s=start,
        end_s=steps[-1],
        input_tokens=[1] * len(outputs),
        output_tokens=outputs,
        step_times_s=steps,
        step_tokens=tokens or [1] * len(steps),
    )


def test_percentiles_interpolate_and_scale():
    p = percentiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], scale=1000)
    assert p == pytest.approx({"p50": 5500, "p90": 9100, "p99": 9910})
    assert percentiles([]) is None


def test_decode_time_excludes_the_first_token():
    secs, steps = decode_time_and_steps([_batch([3], [0.2, 0.3, 0.5]), _batch([1], [0.1])])
    assert secs == pytest.approx(0.3) and steps == 2

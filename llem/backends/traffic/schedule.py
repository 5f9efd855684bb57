"""When each request of a serving workload is sent: drawn once, before the window, from a seed.

``build_schedule(traffic, prompts)`` returns ``traffic.n_requests`` requests (or, open loop with
``traffic.duration_s``, ``ceil(rate x duration)``; one per prompt when neither is set; more requests
than prompts cycle through them) with their ``scheduled_s``, seconds after the
workload's origin:

- ``offline``: every request at 0;
- ``poisson``: exponential gaps of mean ``1 / rate_per_s``;
- ``gamma``: gamma gaps of shape ``burstiness`` and mean ``1 / rate_per_s`` (their coefficient of
  variation is ``1 / sqrt(burstiness)``; shape 1 is Poisson), as ML.ENERGY's benchmark and vLLM's
  ``bench serve`` draw them;
- ``constant``: one request every ``1 / rate_per_s`` seconds;
- ``concurrency`` (closed loop): ``None``, the driver sends each as a slot frees.

Open-loop traffic sends its first request at 0. Gaps come from ``random.Random(traffic.seed)``
(Python's Mersenne Twister, whose ``random()`` stream Python keeps stable across versions for a
seed): exponential gaps by inverting the CDF of ``random()``, gamma gaps by
``Random.gammavariate``. The same seed and configuration give the same times.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence

from llem.config.traffic import TrafficConfig, TrafficKind, request_count
from llem.vocabulary.workload import Prompt, ScheduledRequest


def build_schedule(traffic: TrafficConfig, prompts: Sequence[Prompt]) -> list[ScheduledRequest]:
    """Every request of the workload, in send order, with its planned send time."""
    n = request_count(traffic, len(prompts))
    if n and not prompts:
        raise ValueError("a workload of requests needs at least one prompt")
    times = itertools.islice(_send_times(traffic), n)
    return [
        ScheduledRequest(i, i % len(prompts), prompts[i % len(prompts)], t)
        for i, t in enumerate(times)
    ]


def _send_times(traffic: TrafficConfig) -> Iterator[float | None]:
    """An endless stream of send times for ``traffic`` (``None`` each for closed loop)."""
    kind = traffic.kind
    if kind == TrafficKind.concurrency:
        return itertools.repeat(None)
    if kind == TrafficKind.offline:
        return itertools.repeat(0.0)
    rate = traffic.rate_per_s
    if rate is None or rate <= 0:
        raise ValueError(f"traffic={kind.value} needs traffic.rate_per_s > 0")
    return _cumulative(_gaps(kind, rate, traffic.burstiness, random.Random(traffic.seed)))


def _gaps(
    kind: TrafficKind, rate: float, shape: float | None, rng: random.Random
) -> Iterator[float]:
    if kind == TrafficKind.constant:
        return itertools.repeat(1.0 / rate)
    if kind == TrafficKind.poisson:
        return (-math.log(1.0 - rng.random()) / rate for _ in itertools.count())
    if shape is None or shape <= 0:
        raise ValueError("traffic=gamma needs traffic.burstiness > 0")
    return (rng.gammavariate(shape, 1.0 / (shape * rate)) for _ in itertools.count())


def _cumulative(gaps: Iterator[float]) -> Iterator[float]:
    """0 for the first request, then the running sum of the gaps."""
    t = 0.0
    yield t
    for gap in gaps:
        t += gap
        yield t

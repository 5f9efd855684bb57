"""The ``traffic:`` group: when the requests of a serving workload are sent.

``offline`` (the default) hands every request over at time 0, as llem always did. Open loop
(``poisson``, ``gamma``, ``constant``) sends each request at a time drawn from ``seed`` before the
window, whether or not earlier requests have finished. Closed loop (``concurrency``) keeps
``max_concurrency`` requests in flight and sends the next one as soon as one finishes. The send
times themselves are built by ``llem.backends.traffic.schedule.build_schedule``.

Steady-state edges of open-loop traffic: the window starts once ``warmup_requests`` requests have
finished and ends when the last ``cooldown_requests`` requests arrive. Left null, each edge is 10%
of the run's requests, rounded up (``edge_requests``): a fixed count would swallow a short run
whole and be negligible in a long one, and 10% at each end keeps 80% of the requests while
dropping the ramp-up, where the engine starts empty, and the drain, where no new requests keep it
busy. This is llem's own rule: vLLM's ``bench serve`` sends ``--num-warmups`` extra requests
before its clock starts and leaves no cool-down out, so its figures cover every measured request;
set both edges to 0 for figures over the whole run.

How many requests: ``n_requests``, or (open loop) ``duration_s``: requests are sent for that long,
``ceil(rate_per_s x duration_s)`` of them, so that every rate of a sweep spans the same time and
its steady state the same share of it; with neither, one request per prompt (``request_count``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from llem.config.knobs import LLEM, knob


class TrafficKind(Enum):
    offline = "offline"
    poisson = "poisson"
    gamma = "gamma"
    constant = "constant"
    concurrency = "concurrency"


#: Kinds that send each request at a scheduled time drawn at a rate (open loop).
OPEN_LOOP = (TrafficKind.poisson, TrafficKind.gamma, TrafficKind.constant)

#: Share of the requests excluded at each open-loop edge when warmup/cooldown_requests are null.
DEFAULT_EDGE_FRACTION = 0.1


@dataclass
class TrafficConfig:
    kind: TrafficKind = knob(
        TrafficKind.offline,
        doc="How requests arrive: offline (all at once), poisson, gamma, constant (open loop at "
        "rate_per_s) or concurrency (closed loop, max_concurrency in flight).",
        goes_to=LLEM,
    )
    rate_per_s: float | None = knob(
        None,
        doc="Mean arrival rate (requests/s) of poisson, gamma and constant traffic.",
        goes_to=LLEM,
        gt=0,
        placeholder="REQUESTS_PER_S",
    )
    burstiness: float | None = knob(
        None,
        doc="Shape of gamma traffic's gaps (1 is Poisson; below 1 burstier, above 1 steadier).",
        goes_to=LLEM,
        gt=0,
        placeholder="SHAPE",
    )
    max_concurrency: int | None = knob(
        None,
        doc="Requests kept in flight by concurrency traffic (the next sent as one finishes).",
        goes_to=LLEM,
        ge=1,
        placeholder="N",
    )
    n_requests: int | None = knob(
        None,
        doc="Requests in the workload; null: one per prompt (more cycle through the prompts).",
        goes_to=LLEM,
        ge=1,
    )
    duration_s: float | None = knob(
        None,
        doc="Open loop: send requests for this long (s): ceil(rate_per_s x duration_s) of them, "
        "in place of n_requests (set one of the two).",
        goes_to=LLEM,
        gt=0,
        placeholder="SECONDS",
    )
    seed: int = knob(0, doc="Seed of the drawn send times (poisson and gamma).", goes_to=LLEM)
    warmup_requests: int | None = knob(
        None,
        doc="Open loop: the steady state starts once this many requests have finished; null: "
        "10% of the requests, rounded up.",
        goes_to=LLEM,
        ge=0,
    )
    cooldown_requests: int | None = knob(
        None,
        doc="Open loop: the steady state ends when the last this-many requests arrive; null: "
        "10% of the requests, rounded up.",
        goes_to=LLEM,
        ge=0,
    )


def is_open_loop(traffic: TrafficConfig) -> bool:
    return traffic.kind in OPEN_LOOP


def planned_requests(traffic: TrafficConfig) -> int | None:
    """The requests the traffic names: ``n_requests``; else, for open-loop traffic with
    ``duration_s``, ``ceil(rate_per_s x duration_s)``; None: one per prompt."""
    if traffic.n_requests is not None:
        return traffic.n_requests
    if traffic.duration_s is not None and traffic.rate_per_s and is_open_loop(traffic):
        # the product rounded first, so that 8/s x 2.5 s is 20 requests and not 21
        return max(1, math.ceil(round(traffic.rate_per_s * traffic.duration_s, 9)))
    return None


def request_count(traffic: TrafficConfig, n_prompts: int) -> int:
    """The requests of the workload (``planned_requests``, else one per prompt)."""
    planned = planned_requests(traffic)
    return n_prompts if planned is None else planned


def edge_requests(traffic: TrafficConfig, n_requests: int) -> tuple[int, int]:
    """(warm-up, cool-down) requests excluded from an open-loop steady state of ``n_requests``.

    A null field is ``DEFAULT_EDGE_FRACTION`` of ``n_requests``, rounded up.
    """
    default = math.ceil(DEFAULT_EDGE_FRACTION * n_requests)
    warmup = default if traffic.warmup_requests is None else traffic.warmup_requests
    cooldown = default if traffic.cooldown_requests is None else traffic.cooldown_requests
    return warmup, cooldown

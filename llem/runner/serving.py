"""The run layer's serving path: the schedule, ``Backend.serve`` inside the window, and the
serving sections of the result (``traffic``, ``concurrency``, ``steady_state``, ``goodput``, the
latency of every request) with ``requests.jsonl``, for every run, offline ``generate`` runs
included (their batches become request timelines that arrive at their batch's start).

A run serves (``serves``) when its traffic is not offline, or ``pytorch.batching=continuous``;
vLLM's offline runs keep calling ``generate``. Definitions: ``llem.figures.serving``.

The traffic, SLO and steady-state settings are read by their field names from the
configuration (``traffic:``, ``slo:``, ``measurement.min_steady_state_s``,
``measurement.min_steady_concurrency``); where a configuration has no such section yet, the
defaults below stand in for it (offline, no SLO, 20 s, 0.85).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llem.backends import serves
from llem.backends.types import (
    Backend,
    BatchOutput,
    LoadedModel,
    Prompt,
    RequestTimeline,
    ScheduledRequest,
    ServeOutput,
)
from llem.config.schema import ExperimentConfig
from llem.figures.serving import Slo, SteadyRule, request_records
from llem.figures.timelines import timelines_from_batches
from llem.measure import MeasurementSession
from llem.result import RunResult, write_requests
from llem.runner.serving_sections import SectionInputs, fill_sections

log = logging.getLogger("llem.run")

OFFLINE = "offline"
CLOSED_LOOP = "concurrency"
OPEN_LOOP = ("poisson", "gamma", "constant")
#: an open-loop edge (traffic.warmup_requests, cooldown_requests) left null: this share of the
#: requests, rounded up (the traffic configuration's own rule, ``edge_requests``)
EDGE_FRACTION = 0.1
SERVED_BANDWIDTH = (
    "not estimated for a served workload: requests join and leave the running batch at every "
    "engine step, and the estimate assumes a fixed batch"
)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


@dataclass(frozen=True)
class TrafficSettings:
    """The ``traffic:`` section's fields as the run reads them (``traffic_settings``)."""

    kind: str = OFFLINE
    rate_per_s: float | None = None
    burstiness: float | None = None
    max_concurrency: int | None = None
    n_requests: int | None = None
    seed: int = 0
    warmup_requests: int | None = None  # None: EDGE_FRACTION of the requests, rounded up
    cooldown_requests: int | None = None

    @property
    def open_loop(self) -> bool:
        return self.kind in OPEN_LOOP

    @property
    def closed_loop(self) -> bool:
        return self.kind == CLOSED_LOOP


def traffic_settings(exp: ExperimentConfig) -> TrafficSettings:
    """``exp.traffic`` read field by field (offline when the configuration has no section)."""
    section = getattr(exp, "traffic", None)
    if section is None:
        return TrafficSettings()
    values = {
        f.name: _plain(getattr(section, f.name, f.default))
        for f in dataclasses.fields(TrafficSettings)
    }
    values["kind"] = str(values["kind"] or OFFLINE)
    values["seed"] = int(values["seed"] or 0)
    return TrafficSettings(**values)


def slo_settings(exp: ExperimentConfig) -> Slo:
    section = getattr(exp, "slo", None)
    if section is None:
        return Slo()
    return Slo(
        getattr(section, "ttft_ms", None),
        getattr(section, "tpot_ms", None),
        getattr(section, "e2e_ms", None),
    )


# --------------------------------------------------------------------------- the schedule


def build_schedule(traffic: Any, prompts: Sequence[Prompt]) -> list[ScheduledRequest]:
    """``llem.backends.traffic.schedule.build_schedule`` (the traffic helper's), or, until it
    is there, ``_stand_in_schedule``."""
    try:
        module = importlib.import_module("llem.backends.traffic.schedule")
    except ImportError:
        return _stand_in_schedule(traffic, prompts)
    built: list[ScheduledRequest] = module.build_schedule(traffic, prompts)
    return built


def _stand_in_schedule(traffic: Any, prompts: Sequence[Prompt]) -> list[ScheduledRequest]:
    """STAND-IN (until llem.backends.traffic.schedule lands): every request's send time, drawn
    from the seed. Offline: all at 0; closed loop: None; constant: i / rate; poisson and gamma:
    gaps drawn from a gamma distribution of shape ``burstiness`` (1 for poisson) and mean
    1 / rate."""
    t = traffic if isinstance(traffic, TrafficSettings) else TrafficSettings()
    n = t.n_requests or len(prompts)
    rng = random.Random(t.seed)
    at = 0.0
    out = []
    for i in range(n):
        scheduled: float | None = 0.0
        if t.closed_loop:
            scheduled = None
        elif t.open_loop and t.rate_per_s:
            shape = 1.0 if t.kind == "poisson" else float(t.burstiness or 1.0)
            gap = 1.0 / t.rate_per_s
            if t.kind != "constant":
                gap = rng.gammavariate(shape, 1.0 / (t.rate_per_s * shape))
            scheduled, at = (at if i else 0.0), at + gap
        out.append(ScheduledRequest(i, i % len(prompts), prompts[i % len(prompts)], scheduled))
    return out


@dataclass(frozen=True)
class ServePlan:
    """What the run serves: the requests (their send times drawn before the window)."""

    requests: list[ScheduledRequest]
    max_concurrency: int | None


def plan(exp: ExperimentConfig, prompts: Sequence[Prompt]) -> ServePlan | None:
    """The run's schedule, or None when it generates batches instead."""
    if not serves(exp):
        return None
    section = getattr(exp, "traffic", None) or traffic_settings(exp)
    settings = traffic_settings(exp)
    return ServePlan(build_schedule(section, prompts), settings.max_concurrency)


def serve(backend: Backend[Any], loaded: LoadedModel, served: ServePlan) -> ServeOutput:
    """``backend.serve`` once (inside the measured window: no pass repetition)."""
    return backend.serve(loaded, served.requests, served.max_concurrency)


def as_batch(out: ServeOutput) -> BatchOutput:
    """A served workload as one batch of per-request timelines, for the figures that read
    batches (counts, prefix cache, compute, generations). It has no engine steps: the decode
    bandwidth estimate of a batch does not apply to requests that join and leave."""
    reqs = out.requests
    texts = [t.text or "" for t in reqs] if any(t.text is not None for t in reqs) else None
    cached = [t.cached_input_tokens for t in reqs]
    return BatchOutput(
        start_s=out.start_s,
        end_s=out.end_s,
        input_tokens=[t.input_tokens for t in reqs],
        output_tokens=[t.output_tokens for t in reqs],
        step_times_s=[],
        step_tokens=[],
        texts=texts,
        num_beams=out.num_beams,
        request_step_times_s=[list(t.chunk_times_s) for t in reqs],
        request_step_tokens=[list(t.chunk_tokens) for t in reqs],
        cached_input_tokens=None if any(c is None for c in cached) else [c or 0 for c in cached],
    )


# --------------------------------------------------------------------------- after the window


@dataclass(frozen=True)
class Served:
    """What the window ran, as requests: ``served`` when the run served, else its batches."""

    outputs: Sequence[BatchOutput]
    served: ServeOutput | None
    n_prompts: int


def fill_serving(
    result: RunResult,
    exp: ExperimentConfig,
    ran: Served,
    session: MeasurementSession,
    backend: Backend[Any],
    loaded: LoadedModel,
    run_dir: Path,
) -> None:
    """The serving sections and requests.jsonl of a run whose window has ended."""
    window = session.last_window
    if window is None:
        return
    timelines, origin, ttft_origin = _timelines(ran)
    traffic = traffic_settings(exp)
    max_batch = backend.batch_size(loaded)
    knob = _knob(exp, traffic, max_batch)
    rule = _rule(exp, traffic, max_batch, len(timelines))
    if len(timelines) < 2 * rule.max_batch:
        log.warning(
            "%d requests < 2 x the maximum batch %s=%d: the batch fills and drains within the "
            "window and there is no steady state (send more requests: traffic.n_requests)",
            len(timelines),
            knob[0],
            rule.max_batch,
        )
    slo = slo_settings(exp)
    fill_sections(
        result,
        SectionInputs(
            timelines=timelines,
            origin_s=origin,
            ttft_origin=ttft_origin,
            window=window,
            source=session.source,
            unavailable_reason=session.unavailable_reason,
            traffic=traffic,
            knob=knob,
            rule=rule,
            slo=slo,
            paced=ran.served is not None,
        ),
    )
    write_requests(run_dir, request_records(timelines, window.start_s, slo))
    if ran.served is not None and result.compute.decode_bandwidth_utilisation is None:
        result.null_reasons["compute.decode_bandwidth_utilisation"] = SERVED_BANDWIDTH


def _timelines(ran: Served) -> tuple[list[RequestTimeline], float, str]:
    if ran.served is not None:
        return list(ran.served.requests), ran.served.start_s, ran.served.ttft_origin
    timelines = timelines_from_batches(ran.outputs, ran.n_prompts)
    origin = ran.outputs[0].start_s if ran.outputs else 0.0
    return timelines, origin, "batch start"


def _knob(exp: ExperimentConfig, traffic: TrafficSettings, max_batch: int) -> tuple[str, int]:
    """The key that bounds the requests in flight, and its value."""
    if traffic.closed_loop and traffic.max_concurrency is not None:
        return "traffic.max_concurrency", int(traffic.max_concurrency)
    key = "vllm.max_num_seqs" if exp.backend == "vllm" else "pytorch.batch_size"
    return key, max_batch


def _rule(
    exp: ExperimentConfig, traffic: TrafficSettings, max_batch: int, n_requests: int
) -> SteadyRule:
    b = max_batch
    edge = math.ceil(EDGE_FRACTION * n_requests)
    if traffic.closed_loop and traffic.max_concurrency:
        b = min(b, int(traffic.max_concurrency))
    m = exp.measurement
    return SteadyRule(
        open_loop=traffic.open_loop,
        max_batch=b,
        warmup_requests=edge if traffic.warmup_requests is None else traffic.warmup_requests,
        cooldown_requests=edge if traffic.cooldown_requests is None else traffic.cooldown_requests,
        min_s=float(getattr(m, "min_steady_state_s", 20.0)),
        min_concurrency=float(getattr(m, "min_steady_concurrency", 0.85)),
    )

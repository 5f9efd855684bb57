"""The run layer's serving path: the schedule, ``Backend.serve`` inside the window, and the
serving sections of the result (``traffic``, ``concurrency``, ``steady_state``, ``goodput``, the
latency of every request) with ``requests.jsonl``, for every run, offline ``generate`` runs
included (their batches become request timelines that arrive at their batch's start).

A run serves (``serves``) when its traffic is not offline, or ``pytorch.batching=continuous``;
vLLM's offline runs keep calling ``generate``. Definitions: ``llem.figures.serving``
and ``llem.figures.steady_state``.

The traffic, SLO and steady-state settings come from ``traffic:``, ``slo:``,
``measurement.min_steady_state_s`` and ``measurement.min_steady_concurrency``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llem.backends import serves
from llem.backends.traffic.schedule import build_schedule
from llem.config.engines import active_engine
from llem.config.schema import ExperimentConfig
from llem.config.traffic import TrafficConfig, TrafficKind, edge_requests, is_open_loop
from llem.figures.serving import Slo, request_records
from llem.figures.steady_state import SteadyRule
from llem.figures.timelines import ACTUAL_SEND, batches_ttft_origin, timelines_from_batches
from llem.measure import MeasurementSession
from llem.result import RunResult, write_requests
from llem.runner.attribution import fill_attribution
from llem.runner.serving_sections import SectionInputs, fill_sections
from llem.runner.steps import fill_engine_steps, window_steps
from llem.vocabulary.engine import Backend
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import (
    BatchOutput,
    Prompt,
    RequestTimeline,
    ScheduledRequest,
    ServeOutput,
)

log = logging.getLogger("llem.run")

SERVED_BANDWIDTH = (
    "not estimated for a served workload: requests join and leave the running batch at every "
    "engine step, and the estimate assumes a fixed batch"
)


def slo_settings(exp: ExperimentConfig) -> Slo:
    return Slo(exp.slo.ttft_ms, exp.slo.tpot_ms, exp.slo.e2e_ms)


# --------------------------------------------------------------------------- the schedule


@dataclass(frozen=True)
class ServePlan:
    """What the run serves: the requests (their send times drawn before the window)."""

    requests: list[ScheduledRequest]
    max_concurrency: int | None


def plan(exp: ExperimentConfig, prompts: Sequence[Prompt]) -> ServePlan | None:
    """The run's schedule, or None when it generates batches instead."""
    if not serves(exp):
        return None
    return ServePlan(build_schedule(exp.traffic, prompts), exp.traffic.max_concurrency)


def offline_requests(exp: ExperimentConfig, prompts: Sequence[Prompt]) -> list[Prompt]:
    """The prompts a ``generate`` run hands over: ``traffic.n_requests`` of them, cycling through
    the prompt set, or the prompt set itself when it is null."""
    n = exp.traffic.n_requests
    if n is None or serves(exp) or not prompts:
        return list(prompts)
    return [prompts[i % len(prompts)] for i in range(n)]


def serve_once(backend: Backend[object], loaded: LoadedModel, served: ServePlan) -> ServeOutput:
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
    backend: Backend[object],
    loaded: LoadedModel,
    run_dir: Path,
) -> None:
    """The serving sections and requests.jsonl of a run whose window has ended."""
    window = session.last_window
    if window is None:
        return
    timelines, origin, ttft_origin = _timelines(ran)
    traffic = exp.traffic
    max_batch = backend.batch_size(loaded)
    knob = _knob(exp, traffic, max_batch)
    rule = _rule(exp, traffic, max_batch, len(timelines), static_batches(ran))
    if not rule.static_batches and rule.max_batch > 0 and len(timelines) < 2 * rule.max_batch:
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
            token_times=ran.served.token_times if ran.served is not None else None,
        ),
    )
    write_requests(run_dir, request_records(timelines, window.start_s, slo))
    steps = window_steps(ran.served, ran.outputs, window.start_s, window.end_s)
    fill_engine_steps(result, steps, run_dir)
    # after requests.jsonl and steps.csv: the attribution adds each request's and step's energy
    fill_attribution(result, steps.steps, session, run_dir, steps.clock, steps.shares_estimated)
    if ran.served is not None and result.compute.decode_bandwidth_utilisation is None:
        result.null_reasons["compute.decode_bandwidth_utilisation"] = SERVED_BANDWIDTH


def _timelines(ran: Served) -> tuple[list[RequestTimeline], float, str]:
    if ran.served is not None:
        # TTFT runs from each request's send (llem.figures.serving), whatever the pacing
        return list(ran.served.requests), ran.served.start_s, ACTUAL_SEND
    timelines = timelines_from_batches(ran.outputs, ran.n_prompts)
    origin = ran.outputs[0].start_s if ran.outputs else 0.0
    return timelines, origin, batches_ttft_origin(ran.outputs, ran.n_prompts)


def static_batches(ran: Served) -> bool:
    """Whether the window ran static batches (each to its end before the next starts): batches
    from ``generate`` whose engine did not schedule each request on its own (no per-request
    timelines, ``BatchOutput.request_step_times_s``). No steady state is judged for them."""
    return ran.served is None and all(o.request_step_times_s is None for o in ran.outputs)


def _knob(exp: ExperimentConfig, traffic: TrafficConfig, max_batch: int) -> tuple[str, int]:
    """The key that bounds the requests in flight, and its value."""
    if traffic.kind == TrafficKind.concurrency and traffic.max_concurrency is not None:
        return "traffic.max_concurrency", int(traffic.max_concurrency)
    return active_engine(exp).concurrency_knob, max_batch


def _rule(
    exp: ExperimentConfig,
    traffic: TrafficConfig,
    max_batch: int,
    n_requests: int,
    static: bool = False,
) -> SteadyRule:
    b = max_batch
    if traffic.kind == TrafficKind.concurrency and traffic.max_concurrency:
        b = min(b, int(traffic.max_concurrency))
    warmup, cooldown = edge_requests(exp.traffic, n_requests)
    m = exp.measurement
    return SteadyRule(
        open_loop=is_open_loop(traffic),
        max_batch=b,
        warmup_requests=warmup,
        cooldown_requests=cooldown,
        min_s=m.min_steady_state_s,
        min_concurrency=m.min_steady_concurrency,
        static_batches=static,
    )

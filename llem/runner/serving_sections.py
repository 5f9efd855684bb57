"""Filling the result's serving sections from the window's request timelines (the figures are
``llem.figures.serving``'s, the steady state ``llem.figures.steady_state``'s; the steady state's
energy is read at its edges by ``llem.measure.interval``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llem.config.traffic import TrafficConfig
from llem.figures.serving import (
    Slo,
    concurrency,
    finished_between,
    goodput,
    latency_figures,
    pacing_lateness_ms,
    request_figures,
    tokens_between,
)
from llem.figures.steady_state import (
    BATCH_RULE,
    OPEN_LOOP_RULE,
    SteadyEdges,
    SteadyRule,
    steady_state,
)
from llem.measure.interval import interval_energy
from llem.measure.meter import WindowResult
from llem.measure.power_source import PowerSource
from llem.result import (
    Concurrency,
    Figure,
    Goodput,
    Lateness,
    Percentiles,
    RunResult,
    SteadyState,
    Traffic,
)
from llem.result.figure import with_figures
from llem.vocabulary.workload import RequestTimeline

NO_SLO = "no SLO set (slo.ttft_ms, slo.tpot_ms and slo.e2e_ms are null)"


@dataclass(frozen=True)
class SectionInputs:
    timelines: Sequence[RequestTimeline]
    origin_s: float  # the workload's origin (perf_counter)
    ttft_origin: str
    window: WindowResult
    source: PowerSource | None
    unavailable_reason: str | None
    traffic: TrafficConfig
    knob: tuple[str, int]
    rule: SteadyRule
    slo: Slo
    paced: bool  # requests were sent by the pacing driver (Backend.serve)
    token_times: str | None = None  # why no request has per-token times (ServeOutput's)


#: the figures that need each request's per-token times (first token, gaps)
TOKEN_TIME_LATENCIES = ("ttft_ms", "itl_ms", "tpot_ms", "itl_per_token_ms", "ttft_from_schedule_ms")
RUNNING = ("running_mean", "running_max", "steady_state_running_mean")


def _steady_edges(x: SectionInputs) -> SteadyEdges:
    """The steady state's edges; without per-token times the full-batch rule (which needs each
    request's first token) is not applied, and the open-loop one has no running batch."""
    if x.token_times is not None and not x.rule.open_loop and not x.rule.static_batches:
        why = f"the full-batch rule needs each request's first-token time ({x.token_times})"
        return SteadyEdges(None, None, None, BATCH_RULE, why, judged=False)
    steady = steady_state(x.timelines, x.rule, x.origin_s)
    if x.token_times is not None:
        steady = dataclasses.replace(steady, mean_running=None)
    return steady


def fill_sections(result: RunResult, x: SectionInputs) -> None:
    """latency (every request's), traffic, concurrency, steady_state and goodput."""
    figures = [request_figures(t) for t in x.timelines]
    _latency(result, figures, x.ttft_origin, x.token_times)
    _traffic(result, x)
    w = x.window
    whole = concurrency(x.timelines, w.start_s, w.end_s)
    steady = _steady_edges(x)
    result.concurrency = Concurrency(
        knob=x.knob[0],
        knob_value=x.knob[1] or None,  # 0: the engine does not know its limit
        mean=None if whole is None else round(whole.mean, 4),
        max=None if whole is None else whole.max,
        steady_state_mean=None
        if steady.mean_concurrency is None
        else round(steady.mean_concurrency, 4),
        running_mean=None if whole is None else round(whole.running_mean, 4),
        running_max=None if whole is None else whole.running_max,
        steady_state_running_mean=None
        if steady.mean_running is None
        else round(steady.mean_running, 4),
    )
    if whole is None:
        result.null_reasons["concurrency.mean"] = "the measured window is empty"
    if x.token_times is not None:  # running: from the first token on, which is not known
        result.concurrency = dataclasses.replace(
            result.concurrency, running_mean=None, running_max=None, steady_state_running_mean=None
        )
        result.null_reasons.update({f"concurrency.{k}": x.token_times for k in RUNNING})
    if steady.start_s is None or steady.end_s is None:
        reason = steady.null_reason or "no steady state"
        result.steady_state = None
        result.null_reasons["steady_state"] = reason
        result.null_reasons["concurrency.steady_state_mean"] = reason
        result.null_reasons["concurrency.steady_state_running_mean"] = reason
        _record_steady_check(result, f"no steady state: {reason}" if steady.judged else None)
    else:
        _steady(result, x, steady)
        _record_steady_check(result, None)
    _goodput(result, figures, x)


def _pct(values: dict[str, float] | None) -> Percentiles:
    if values is None:
        return Percentiles()
    return Percentiles(**{k: round(v, 4) for k, v in values.items()})


NO_SCHEDULE = "no request had a scheduled send time (closed-loop traffic or generate batches)"


def _latency(
    result: RunResult, figures: Sequence[Any], ttft_origin: str, token_times: str | None
) -> None:
    lat = latency_figures(figures)
    latency = result.latency
    latency.ttft_origin = ttft_origin
    e2e_s = None if lat.e2e_ms is None else {k: v / 1000.0 for k, v in lat.e2e_ms.items()}
    no_tokens, one_token = "no tokens were generated", "no request produced more than one token"
    for key, values, why in (
        ("ttft_ms", lat.ttft_ms, no_tokens),
        ("itl_ms", lat.itl_ms, one_token),
        ("tpot_ms", lat.tpot_ms, one_token),
        ("e2e_ms", lat.e2e_ms, no_tokens),
        ("request_latency_s", e2e_s, no_tokens),
        ("itl_per_token_ms", lat.itl_per_token_ms, one_token),
        ("ttft_from_schedule_ms", lat.ttft_from_schedule_ms, NO_SCHEDULE),
        ("e2e_from_schedule_ms", lat.e2e_from_schedule_ms, NO_SCHEDULE),
    ):
        setattr(latency, key, _pct(values))
        if values is None:
            untimed = token_times is not None and key in TOKEN_TIME_LATENCIES
            result.null_reasons[f"latency.{key}"] = token_times if token_times and untimed else why
        else:
            result.null_reasons.pop(f"latency.{key}", None)


def _traffic(result: RunResult, x: SectionInputs) -> None:
    t = x.traffic
    late = pacing_lateness_ms(x.timelines) if x.paced else None
    result.traffic = Traffic(
        kind=t.kind.value,
        rate_per_s=t.rate_per_s,
        burstiness=t.burstiness,
        n_requests=len(x.timelines),
        max_concurrency=t.max_concurrency,
        seed=t.seed,
        pacing_lateness_ms=None
        if late is None
        else Lateness(**{k: round(v, 4) for k, v in late.items()}),
    )
    if late is None:
        result.null_reasons["traffic.pacing_lateness_ms"] = (
            "closed-loop traffic: requests have no scheduled send time"
            if x.paced
            else "generate batches: requests are handed over in batches, not paced"
        )


def _steady(result: RunResult, x: SectionInputs, steady: SteadyEdges) -> None:
    assert steady.start_s is not None and steady.end_s is not None
    start, end = steady.start_s, steady.end_s
    span = end - start
    tokens = tokens_between(x.timelines, start, end)
    energy = interval_energy(
        x.window, start, end, source=x.source, unavailable_reason=x.unavailable_reason
    )
    figures = {
        "energy_j": energy,
        "j_per_output_token": _ratio(energy, tokens, "no output tokens in the steady state"),
        "avg_power_w": _ratio(energy, span, "the steady state is empty"),
    }
    section, reasons = with_figures(
        SteadyState(
            rule=_rule_name(x.rule),
            start_s=round(start - x.window.start_s, 6),
            end_s=round(end - x.window.start_s, 6),
            window_s=round(span, 6),
            requests=finished_between(x.timelines, start, end),
            output_tokens=tokens,
            output_tokens_per_s=round(tokens / span, 3),
            mean_concurrency=round(steady.mean_concurrency or 0.0, 4),
            mean_running=None if steady.mean_running is None else round(steady.mean_running, 4),
        ),
        "steady_state",
        figures,
    )
    result.steady_state = section
    result.null_reasons.pop("steady_state", None)
    result.null_reasons.update(reasons)


def _rule_name(rule: SteadyRule) -> str:
    return OPEN_LOOP_RULE if rule.open_loop else BATCH_RULE


def _ratio(energy: Figure, denominator: float, empty: str) -> Figure:
    """``energy / denominator`` with the bound divided the same way (an exact denominator)."""
    if energy.value is None:
        return energy
    if denominator <= 0:
        return Figure.null(empty)
    bound = None if energy.bound is None else energy.bound / denominator
    return Figure.of(energy.value / denominator, None, bound, energy.bound_null_reason)


def _goodput(result: RunResult, figures: Sequence[Any], x: SectionInputs) -> None:
    window_s = x.window.window_s
    timed_slos = [k for k in ("ttft_ms", "tpot_ms") if getattr(x.slo, k) is not None]
    if x.token_times is not None and timed_slos:
        result.goodput = None
        keys = " and ".join(f"slo.{k}" for k in timed_slos)
        result.null_reasons["goodput"] = f"{keys} cannot be judged: {x.token_times}"
        return
    g = goodput(figures, x.slo, window_s)
    if g is None:
        result.goodput = None
        result.null_reasons["goodput"] = NO_SLO if not x.slo.any else "no requests were served"
        return
    total = result.figure("energy.total_j")
    per_token = _ratio(total, g.good_output_tokens, "no request met every SLO")
    section, reasons = with_figures(
        Goodput(
            slo_ttft_ms=x.slo.ttft_ms,
            slo_tpot_ms=x.slo.tpot_ms,
            slo_e2e_ms=x.slo.e2e_ms,
            requests_met=g.requests_met,
            fraction=round(g.fraction, 4),
            requests_per_s=round(g.requests_per_s, 4),
            output_tokens_per_s=round(g.output_tokens_per_s, 3),
        ),
        "goodput",
        {"j_per_output_token": per_token},
    )
    result.goodput = section
    result.null_reasons.pop("goodput", None)
    result.null_reasons.update(reasons)


def _record_steady_check(result: RunResult, condition: str | None) -> None:
    """The validity record says whether there is a steady state: a recorded condition, never
    counted against the whole window's energy; "not checked" where none is meant (static
    batches: ``llem.figures.steady_state``)."""
    v = result.validity
    status = "condition" if condition else "passed"
    if condition is None and result.steady_state is None:
        status = "not checked"
    checks = {**v.checks, "steady_state": status}
    conditions = list(v.conditions) + ([condition] if condition else [])
    result.validity = dataclasses.replace(v, checks=checks, conditions=conditions)

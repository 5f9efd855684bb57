"""The attribution proved on the step schedules real engines produce (tests:
test_real_engine_steps.py here, vllm_backend/test_vllm_attribution.py): a run's steps.csv read back
through llem.result, made EngineSteps again on a perf_counter-like clock, planted on the modelled
power source (llem.testing.modelled_power), and attributed the way the run attributes
(llem.runner.attribution.attribute_window). Two timelines: exact (every step's energy known: the
split and the fit alone) and NVML's at 10 Hz (readings per 100 ms window from 25 ms of it, as on
A100/H100: llem.testing.truth.sensor).

The steps keep the real schedule (order, batches, token counts, shares, the gaps between steps)
but last as a planted pace says (``paced``): each part of a step (a request's prefill or decode
tokens) keeps the GPU busy ``t0 n / N + t_p p + t_q q`` of the step's pace (``n`` of the step's
``N`` tokens), the step as a whole running a seeded jitter slower or faster; every schedule lasts
20 s, which NVML's timeline resolves (a window too short for it: the test of a coarse timeline).
So the planted truth of each request is physics, computed here from the planted costs and pace,
independently of the code under test: a part's energy is its tokens' costs ``a p + b q`` plus
its step's static energy ``P_static d`` times its share of the step's pace; idle power between
steps is no request's. (A GPU that does not draw the fitted model: test_truth_coverage.py.)"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest

from llem.figures.attribution import FIT_SPLIT, Attribution, attribute
from llem.result import read_steps
from llem.runner.attribution import attribute_window
from llem.testing.modelled_power import (
    Measured,
    ModelledPower,
    PlantedModel,
    measure_modelled,
    window_spans,
)
from llem.vocabulary.workload import EngineStep

# a small GPU's costs: 4 mJ per prefill token, 50 mJ per decode token, 120 W static, 60 W idle
BY_TIME = 0.5  # the sharing convention: half of a step by its parts' costs, half by time alone
MODEL = PlantedModel(a_j=0.004, b_j=0.05, static_w=120.0, idle_w=60.0)
LIMIT_W = 700.0  # the fake GPU's enforced power limit
# FINE_HZ: every step's energy known exactly (no NVML reading resolves a step: they change every
# 100 ms); COARSE_HZ: NVML's sensor read at the default rate.
FINE_HZ, COARSE_HZ = float("inf"), 10.0
COUNTER_UPDATE_S = 0.1
SAMPLED_FRACTION = 0.25  # A100/H100: 25 ms of each 100 ms window
CLOCK_ORIGIN_S = 5000.0  # where the steps are put on a perf_counter-like clock
# the planted pace (``paced``): a step's fixed s, s per prefill token, s per decode token (a decode
# token keeps a small GPU busy far longer than a prefill token) ...
PACE = (0.02, 5e-4, 4e-3)
# ... where the schedule can show it; where every step decodes as many tokens (a static batch) no
# duration tells a step's fixed time from its decode tokens' time, so there a token of either kind
# takes as long (a pace the steps cannot show is no truth a test can hold the attribution to)
EVEN_PACE = (0.02, 2e-3, 2e-3)
# each step runs this much (relative, seeded) slower or faster than its pace, every part alike:
# without it a step's duration would be a linear function of its tokens, and static power could
# not be told from the tokens' costs where every step decodes as many tokens (a static batch)
JITTER = 0.15
FINE_SHARE = 1e-6  # how far that moves a figure on the exact timeline, at most (relative)
SPAN_S = 20.0  # how long a paced schedule lasts: some 200 of NVML's 100 ms readings


def engine_steps(run_dir: Path) -> list[EngineStep]:
    """The run's steps.csv as EngineSteps on a perf_counter-like clock (their real durations,
    token counts and shares)."""
    out = []
    for r in read_steps(run_dir):
        start = None if r.start_s is None else CLOCK_ORIGIN_S + r.start_s
        out.append(
            EngineStep(
                CLOCK_ORIGIN_S + r.end_s,
                r.running,
                r.prefill_tokens,
                r.decode_tokens,
                start_s=start,
                shares=r.shares,
            )
        )
    return out


def ceiling_w(steps: list[EngineStep], model: PlantedModel = MODEL) -> float:
    """The GPU's power limit: 700 W, or the planted peak where a CPU step is so short that its
    planted tokens draw more (a limit below what the GPU draws would be a false premise of the
    bound of a span no sample saw)."""
    power = ModelledPower(steps, model)
    peak = max(power.power((s.end_s + (s.start_s or s.end_s)) / 2) for s in steps)
    return max(LIMIT_W, peak)


def attribute_modelled(steps: list[EngineStep], hz: float) -> tuple[Measured, Attribution]:
    """The run's attribution of ``steps`` on the modelled power source: every span's exact energy
    where ``hz`` is infinite, else NVML's readings at ``hz``."""
    m = measure_modelled(
        steps,
        MODEL,
        sample_hz=min(hz, 1000.0),
        counter_update_s=COUNTER_UPDATE_S,
        sampled_fraction=SAMPLED_FRACTION,
    )
    if hz == FINE_HZ:
        cut = window_spans(m)
        exact = [m.power.energy(c.start_s, c.end_s) for c in cut]
        return m, attribute(cut, exact, [0.0] * len(cut))
    w = m.window
    got = attribute_window(
        m.steps, w, m.session.source, w.start_s, w.end_s, ceiling_w=ceiling_w(steps)
    )
    assert not isinstance(got, str), got
    return m, got[1]


def paced(steps: list[EngineStep], span_s: float = SPAN_S) -> list[EngineStep]:
    """The real schedule (its order, batches, token counts, shares and the gaps between steps)
    with each step lasting as the planted pace says (``durations``), all scaled to span ``span_s``
    from the first start to the last end, so that NVML's 100 ms readings resolve it."""
    ordered = sorted(steps, key=lambda s: s.end_s)
    out, t, prev_end = [], 0.0, None
    for s, d in zip(ordered, durations(ordered), strict=True):
        start = s.start_s if s.start_s is not None else (prev_end or s.end_s)
        t += max(start - prev_end, 0.0) if prev_end is not None else 0.0
        prev_end = s.end_s
        out.append(dataclasses.replace(s, start_s=t, end_s=t + d))
        t += d
    factor = span_s / t

    def at(x: float) -> float:
        return CLOCK_ORIGIN_S + factor * x

    return [dataclasses.replace(s, start_s=at(s.start_s or 0.0), end_s=at(s.end_s)) for s in out]


def pace_rows(ordered: list[EngineStep]) -> tuple[tuple[float, float, float], list[list[float]]]:
    """The planted pace of the steps (``PACE``, or ``EVEN_PACE`` where their tokens and context
    cannot show it) and each step's (1, prefill tokens, decode tokens, context tokens read: the
    tokens its requests computed in the steps before, counted here from the shares)."""
    import numpy as np

    held: dict[int, int] = {}
    rows = []
    for s in ordered:
        shares = s.shares or ()
        context = sum(held.get(x.request_id, 0) for x in shares)
        rows.append([1.0, s.prefill_tokens or 0, s.decode_tokens or 0, context])
        for x in shares:
            held[x.request_id] = held.get(x.request_id, 0) + x.prefill_tokens + x.decode_tokens
    shown = len(rows) >= 5 and int(np.linalg.matrix_rank(np.array(rows, dtype=float))) == 4
    return (PACE if shown else EVEN_PACE), rows


def durations(ordered: list[EngineStep]) -> list[float]:
    """Each step's planted duration: its pace (``pace_rows``) plus a seeded jitter of up to
    ``JITTER`` of it that no fixed time, per-token time or per-context-token time explains (the
    jitter's least-squares projection on them removed): the steps' durations show the planted
    pace exactly, and a step's static energy is still not a linear function of its tokens."""
    import numpy as np

    (t0, tp, tq), rows = pace_rows(ordered)
    x = np.array(rows, dtype=float)
    pace = x[:, 0] * t0 + x[:, 1] * tp + x[:, 2] * tq
    rng = np.random.default_rng(0)
    jitter = pace * rng.uniform(-JITTER, JITTER, len(rows))
    jitter -= x @ np.linalg.lstsq(x, jitter, rcond=None)[0]
    return [float(v) for v in pace + jitter]


def planted_parts_j(
    steps: list[EngineStep], model: PlantedModel = MODEL
) -> dict[int, tuple[float, float]]:
    """Each request's planted (prefill, decode) energy on ``paced`` steps (module docstring), by
    the sharing convention: half its tokens' costs plus the step's static power for the time its
    parts keep the step busy, as the planted pace says (the step's fixed time shared by tokens),
    and half the whole step's energy for that time alone."""
    ordered = sorted(steps, key=lambda s: s.end_s)
    (t0, tp, tq), _ = pace_rows(ordered)
    out: dict[int, tuple[float, float]] = {}
    for s in ordered:
        shares = s.shares or ()
        d = s.end_s - (s.start_s if s.start_s is not None else s.end_s)
        n = sum(x.prefill_tokens + x.decode_tokens for x in shares)
        busy = t0 + tp * (s.prefill_tokens or 0) + tq * (s.decode_tokens or 0)
        watts = model.static_w * d / busy  # the step's static energy per second of planted pace
        whole = model.a_j * (s.prefill_tokens or 0) + model.b_j * (s.decode_tokens or 0)
        whole = (whole + model.static_w * d) / busy  # the step's energy per second of pace
        for x in shares:
            fixed = t0 / n if n else t0 / len(shares)
            pre = (fixed * x.prefill_tokens if n else 0.0) + tp * x.prefill_tokens
            dec = fixed * (x.decode_tokens if n else 1) + tq * x.decode_tokens
            p0, d0 = out.get(x.request_id, (0.0, 0.0))
            by_cost = (
                model.a_j * x.prefill_tokens + watts * pre,
                model.b_j * x.decode_tokens + watts * dec,
            )
            out[x.request_id] = (
                p0 + (1 - BY_TIME) * by_cost[0] + BY_TIME * whole * pre,
                d0 + (1 - BY_TIME) * by_cost[1] + BY_TIME * whole * dec,
            )
    return out


def planted_request_j(steps: list[EngineStep], model: PlantedModel = MODEL) -> dict[int, float]:
    """Each request's planted energy on ``paced`` steps (``planted_parts_j``)."""
    return {k: p + d for k, (p, d) in planted_parts_j(steps, model).items()}


def planted_phases_j(steps: list[EngineStep], model: PlantedModel = MODEL) -> tuple[float, float]:
    """(prefill, decode) energy the planted model draws in ``paced`` steps."""
    parts = planted_parts_j(steps, model).values()
    return sum(p for p, _ in parts), sum(d for _, d in parts)


@dataclass(frozen=True)
class Recovered:
    """One attribution against the planted truth (the figures the report prints)."""

    a: float | None
    a_bound: float | None
    b: float | None
    b_bound: float | None
    p_static: float | None
    p_static_bound: float | None
    median_request_error_j: float
    median_request_bound_j: float
    median_request_truth_j: float


def recovered(got: Attribution, truth: dict[int, float]) -> Recovered | None:
    """None where the split is null (its reason checked by ``assert_recovered``)."""
    if got.requests is None:
        return None
    fit = got.fit
    return Recovered(
        fit.a.value,
        fit.a.bound,
        fit.b.value,
        fit.b.bound,
        fit.p_static.value,
        fit.p_static.bound,
        statistics.median(abs(r.energy_j - truth[k]) for k, r in got.requests.items()),
        statistics.median(r.bound_j for r in got.requests.values()),
        statistics.median(truth.values()),
    )


def assert_recovered(real: list[EngineStep], hz: float, *, fine: bool) -> Recovered:
    """The attribution of the ``paced`` real schedule at ``hz`` recovers the planted model: each
    coefficient within its bound (exactly on the exact timeline), or null with the reason (never
    on the exact timeline); each request's energy and its prefill and decode parts, and the
    phases, within their bounds of their planted truth (exactly on the exact timeline); the
    phases, and the requests with what is unattributed, add up to the window's energy."""
    steps = paced(real)
    m, got = attribute_modelled(steps, hz)
    planted = {"a": MODEL.a_j, "b": MODEL.b_j, "p_static": MODEL.static_w}
    for name, value in planted.items():
        c = got.fit.coefficient(name)
        if c.value is None:
            assert not fine, f"{name} null at {hz} Hz: {c.null_reason}"
            assert c.null_reason and c.null_reason.startswith(("not resolved", "not identified"))
            continue
        assert c.bound is not None and abs(c.value - value) <= c.bound + 1e-9 * value, (name, c)
        assert not fine or c.value == pytest.approx(value, rel=1e-6), (name, c)
    # the exact timeline identifies all three
    assert not fine or all(got.fit.coefficient(n).value is not None for n in planted)
    assert got.prefill_tokens == sum(s.prefill_tokens or 0 for s in steps)
    assert got.decode_tokens == sum(s.decode_tokens or 0 for s in steps)
    # a paced schedule lasts long enough for NVML's timeline: every request is resolved
    assert got.requests is not None, got.requests_null_reason
    fitted = all(got.fit.coefficient(n).usable is not None for n in planted)
    assert (got.split_method == FIT_SPLIT) == fitted
    parts = planted_parts_j(steps)
    assert set(got.requests) == set(parts)

    def allowed(bound_j: float, truth_j: float) -> float:
        # the exact timeline's bounds are 0: its figures are exact but for how far the jitter
        # moves the steps' fitted pace, which no bound holds; NVML's timeline: its bound
        return FINE_SHARE * truth_j if fine else bound_j + 1e-9 * truth_j

    for rid, r in got.requests.items():
        pre, dec = parts[rid]
        for name, value, truth in (
            ("energy", r.energy_j, pre + dec),
            ("prefill", r.prefill_j, pre),
            ("decode", r.decode_j, dec),
        ):
            assert abs(value - truth) <= allowed(r.bound_j, pre + dec), (rid, name, r, truth)
    assert got.prefill is not None and got.decode is not None and got.between is not None
    for part, truth in zip((got.prefill, got.decode), planted_phases_j(steps), strict=True):
        assert abs(part.energy_j - truth) <= allowed(part.bound_j, truth), (part, truth)
    assert got.unattributed is not None
    phases = got.prefill.energy_j + got.decode.energy_j + got.between.energy_j
    assert phases == pytest.approx(got.total_j, rel=1e-12)
    attributed = sum(r.energy_j for r in got.requests.values())
    assert attributed + got.unattributed.energy_j == pytest.approx(got.total_j, rel=1e-12)
    out = recovered(got, planted_request_j(steps))
    assert out is not None
    return out


def assert_coarse_is_wider(fine: Recovered, coarse: Recovered) -> None:
    """Every bound the NVML timeline gives is wider than the exact one's (a coefficient it
    cannot resolve is null, which hides nothing)."""
    assert coarse.median_request_bound_j > fine.median_request_bound_j, (fine, coarse)
    for name in ("a", "b", "p_static"):
        f, c = getattr(fine, f"{name}_bound"), getattr(coarse, f"{name}_bound")
        assert f is not None, name
        assert c is None or c > f, (name, f, c)

"""The attribution proved on the step schedules real engines produce (tests:
test_real_engine_steps.py here, vllm_backend/test_vllm_attribution.py): a run's steps.csv read back
through llem.result, made EngineSteps again on a perf_counter-like clock, planted on the modelled
power source (llem.testing.modelled_power), and attributed the way the run attributes
(llem.runner.attribution.attribute_window). Two timelines: exact (every step's energy known: the
split and the fit alone) and NVML's at 10 Hz (readings per 100 ms window from 25 ms of it, as on
A100/H100: llem.testing.truth.sensor), where a window too short for the fit leaves the split null
with the reason.

The planted truth of each request is computed here from the planted costs, independently of the
code under test: in a step of ``d`` seconds computing ``N`` tokens, request r's energy is
``a p_r + b q_r + P_static d (p_r + q_r) / N`` (the planted step energy ``a p + b q + P_static d``
split exactly by the planted costs); idle power between steps is no request's. (A GPU that does
not draw the fitted model: test_truth_coverage.py.)"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest

from llem.backends.types import EngineStep
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

# a small GPU's costs: 4 mJ per prefill token, 50 mJ per decode token, 120 W static, 60 W idle
MODEL = PlantedModel(a_j=0.004, b_j=0.05, static_w=120.0, idle_w=60.0)
LIMIT_W = 700.0  # the fake GPU's enforced power limit
# FINE_HZ: every step's energy known exactly (no NVML reading resolves a step: they change every
# 100 ms); COARSE_HZ: NVML's sensor read at the default rate.
FINE_HZ, COARSE_HZ = float("inf"), 10.0
COUNTER_UPDATE_S = 0.1
SAMPLED_FRACTION = 0.25  # A100/H100: 25 ms of each 100 ms window
CLOCK_ORIGIN_S = 5000.0  # where the steps are put on a perf_counter-like clock


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


def planted_request_j(steps: list[EngineStep], model: PlantedModel = MODEL) -> dict[int, float]:
    """Each request's planted energy (module docstring)."""
    out: dict[int, float] = {}
    for s in steps:
        shares = s.shares or ()
        d = s.end_s - (s.start_s if s.start_s is not None else s.end_s)
        n = sum(x.prefill_tokens + x.decode_tokens for x in shares)
        for x in shares:
            tokens = x.prefill_tokens + x.decode_tokens
            static = model.static_w * d * (tokens / n if n else 1.0 / len(shares))
            cost = model.a_j * x.prefill_tokens + model.b_j * x.decode_tokens + static
            out[x.request_id] = out.get(x.request_id, 0.0) + cost
    return out


def request_brackets_j(
    steps: list[EngineStep], model: PlantedModel = MODEL
) -> dict[int, tuple[float, float]]:
    """Each request's planted energy under every way of sharing a step's static power between
    its requests: from its tokens' costs alone (``a p_r + b q_r``) to those plus the whole static
    energy of every step it ran in."""
    out: dict[int, tuple[float, float]] = {}
    for s in steps:
        d = s.end_s - (s.start_s if s.start_s is not None else s.end_s)
        for x in s.shares or ():
            cost = model.a_j * x.prefill_tokens + model.b_j * x.decode_tokens
            low, high = out.get(x.request_id, (0.0, 0.0))
            out[x.request_id] = (low + cost, high + cost + model.static_w * d)
    return out


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


def assert_recovered(steps: list[EngineStep], hz: float, *, fine: bool) -> Recovered | None:
    """The attribution of ``steps`` at ``hz`` recovers the planted model: each coefficient
    within its bound, or null with the reason (never on the exact timeline); each request's
    energy within its bound of its planted truth, or every request null with the reason (a
    window too short for the NVML timeline's intervals); the phases, and the requests with what
    is unattributed, add up to the window's energy."""
    m, got = attribute_modelled(steps, hz)
    planted = {"a": MODEL.a_j, "b": MODEL.b_j, "p_static": MODEL.static_w}
    for name, value in planted.items():
        c = got.fit.coefficient(name)
        if c.value is None:
            assert not fine, f"{name} null at {hz} Hz: {c.null_reason}"
            assert c.null_reason and c.null_reason.startswith(("not resolved", "not identified"))
        else:
            assert c.bound is not None and abs(c.value - value) <= c.bound + 1e-9 * value, (name, c)
    assert got.fit.identified or not fine  # the exact timeline identifies all three
    assert got.prefill_tokens == sum(s.prefill_tokens or 0 for s in steps)
    assert got.decode_tokens == sum(s.decode_tokens or 0 for s in steps)
    if got.requests is None:
        assert not fine and got.split_method is None
        assert got.requests_null_reason and "too coarse" in got.requests_null_reason
        return None
    assert (got.split_method == FIT_SPLIT) == got.fit.splittable
    truth = planted_request_j(steps)
    assert set(got.requests) == set(truth)
    brackets = request_brackets_j(steps)
    for rid, r in got.requests.items():
        # how a step's static power divides between its requests is a convention the energy
        # cannot decide (the planted truth: by tokens; llem: by the time each keeps the step
        # busy), so each request is judged against every convention's range
        low, high = brackets[rid]
        allowed = r.bound_j + 1e-9 * high
        assert low - allowed <= r.energy_j <= high + allowed, (rid, r, low, high)
        assert r.prefill_j + r.decode_j == pytest.approx(r.energy_j)
    assert got.prefill is not None and got.decode is not None and got.between is not None
    assert got.unattributed is not None
    phases = got.prefill.energy_j + got.decode.energy_j + got.between.energy_j
    assert phases == pytest.approx(got.total_j, rel=1e-12)
    attributed = sum(r.energy_j for r in got.requests.values())
    assert attributed + got.unattributed.energy_j == pytest.approx(got.total_j, rel=1e-12)
    out = recovered(got, truth)
    assert out is not None
    if fine:  # the estimates are close, not only inside a wide bound
        assert out.median_request_error_j <= 0.25 * out.median_request_truth_j, out
    return out


def assert_coarse_is_wider(fine: Recovered | None, coarse: Recovered | None) -> None:
    """Every bound the NVML timeline gives is wider than the exact one's (a coefficient or split
    it cannot resolve is null, which hides nothing)."""
    assert fine is not None
    if coarse is None:
        return
    assert coarse.median_request_bound_j > fine.median_request_bound_j, (fine, coarse)
    for name in ("a", "b", "p_static"):
        f, c = getattr(fine, f"{name}_bound"), getattr(coarse, f"{name}_bound")
        assert f is not None, name
        assert c is None or c > f, (name, f, c)

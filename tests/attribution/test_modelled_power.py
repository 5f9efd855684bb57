"""The attribution against a modelled power source (llem.testing.modelled_power): a fake GPU whose
power follows a planted model of the engine's steps, read by the real measurement session at a
chosen sampling rate with a 100 ms counter refresh. The planted J per prefill token, J per decode
token, static power and every request's energy are recovered within their stated bounds at batch
1, at a large batch and under open-loop arrivals; a coarse timeline widens the bounds."""

from __future__ import annotations

import random
import statistics

import pytest

from llem.backends.types import EngineStep
from llem.figures.attribution import Attribution, attribute
from llem.measure.span_energy import span_energies
from llem.testing.modelled_power import (
    Measured,
    ModelledPower,
    PlantedModel,
    measure_modelled,
    simulate,
    window_spans,
)

MODEL = PlantedModel(a_j=0.004, b_j=0.05, static_w=120.0, idle_w=60.0)
CEILING_W = 700.0  # the fake GPU's enforced power limit


def _schedule(kind: str, n: int = 16, seed: int = 3) -> list[EngineStep]:
    rng = random.Random(seed)
    ins = [rng.randint(32, 512) for _ in range(n)]
    outs = [rng.randint(4, 48) for _ in range(n)]
    if kind == "batch1":
        return simulate([0.0] * n, ins, outs, 1, static=True, seed=seed)
    if kind == "batch16":
        return simulate([0.0] * n, ins, outs, 16, static=True, seed=seed)
    arrivals, t = [], 0.0
    for _ in range(n):
        t += rng.expovariate(20.0)
        arrivals.append(t)
    return simulate(arrivals, ins, outs, 8, seed=seed)


def _attribute(steps: list[EngineStep], hz: float) -> tuple[Measured, Attribution]:
    m = measure_modelled(steps, MODEL, sample_hz=hz, counter_update_s=0.1)
    cut = window_spans(m)
    edges = [c.start_s for c in cut] + [cut[-1].end_s]
    e = span_energies(m.window, edges, source=m.session.source, ceiling_w=CEILING_W)
    assert not isinstance(e, str)
    return m, attribute(cut, e.energy_j, e.timing_bound_j, e.scale_relative)


def _within(value: float | None, truth: float, bound: float | None) -> bool:
    assert value is not None and bound is not None
    return abs(value - truth) <= bound


def test_the_modelled_power_consumes_exactly_the_planted_energy_per_step() -> None:
    steps = _schedule("open")
    power = ModelledPower(steps, MODEL)
    for s in steps[:20]:
        d = s.end_s - s.start_s
        planted = MODEL.static_w * d + MODEL.a_j * s.prefill_tokens + MODEL.b_j * s.decode_tokens
        assert power.energy(s.start_s, s.end_s) == pytest.approx(planted, rel=1e-9)
    gap_start = max(s.end_s for s in steps)
    assert power.energy(gap_start, gap_start + 2.0) == pytest.approx(2.0 * MODEL.idle_w)


@pytest.mark.parametrize("kind", ["batch1", "batch16", "open"])
def test_planted_costs_and_each_requests_energy_are_recovered_within_bound(kind: str) -> None:
    m, got = _attribute(_schedule(kind), hz=1000.0)
    fit = got.fit
    assert _within(fit.a.value, MODEL.a_j, fit.a.bound)
    assert _within(fit.b.value, MODEL.b_j, fit.b.bound)
    assert _within(fit.p_static.value, MODEL.static_w, fit.p_static.bound)
    # a fine timeline: the estimates themselves are close, not only inside a wide bound
    assert fit.a.value == pytest.approx(MODEL.a_j, rel=0.05)
    assert fit.b.value == pytest.approx(MODEL.b_j, rel=0.05)
    truth = m.power.request_truth_j()
    assert got.requests is not None and set(got.requests) == set(truth)
    for rid, r in got.requests.items():
        assert _within(r.energy_j, truth[rid], r.bound_j), rid
        assert r.energy_j == pytest.approx(truth[rid], rel=0.1)
        assert r.prefill_j + r.decode_j == pytest.approx(r.energy_j)
    window_j = m.window.devices[0].energy_j
    parts = got.prefill.energy_j + got.decode.energy_j + got.between.energy_j
    assert parts == pytest.approx(window_j, rel=1e-12)
    attributed = sum(r.energy_j for r in got.requests.values())
    assert attributed + got.unattributed.energy_j == pytest.approx(window_j, rel=1e-12)


def test_a_timeline_too_coarse_for_the_steps_widens_every_bound_and_still_covers() -> None:
    steps = _schedule("open")
    m_fine, fine = _attribute(steps, hz=1000.0)
    m_coarse, coarse = _attribute(steps, hz=1.0)
    truth = m_coarse.power.request_truth_j()
    for name, planted in (("a", MODEL.a_j), ("b", MODEL.b_j), ("p_static", MODEL.static_w)):
        c, f = coarse.fit.coefficient(name), fine.fit.coefficient(name)
        assert _within(c.value, planted, c.bound), name
        assert c.bound is not None and f.bound is not None and c.bound > 3 * f.bound, name
    assert coarse.requests is not None and fine.requests is not None
    for rid, r in coarse.requests.items():
        assert _within(r.energy_j, truth[rid], r.bound_j), rid
    median = statistics.median
    coarse_bound = median(r.bound_j for r in coarse.requests.values())
    fine_bound = median(r.bound_j for r in fine.requests.values())
    assert coarse_bound > 3 * fine_bound

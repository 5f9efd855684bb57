"""The attribution (llem.figures.attribution) on planted steps, planted energies and planted fits:
the cases mutation testing found no test for (scripts/mutation.py). Each expected figure is the
planted model's, worked out here by hand."""

from __future__ import annotations

import pytest

from llem.figures.attribution import (
    TOKEN_SPLIT,
    Part,
    RequestEnergy,
    _costs,
    _split_model,
    attribute,
    spans,
)
from llem.figures.bins import Bins
from llem.figures.energy_fit import Coefficient, Fit
from llem.vocabulary.workload import EngineStep, StepShare

A, B, P, P_GAP = 0.004, 0.05, 120.0, 40.0


def _step(t: float, d: float, shares: list[tuple[int, int, int]]) -> EngineStep:
    s = tuple(StepShare(r, p, q) for r, p, q in shares)
    return EngineStep(
        t + d, len(s), sum(x.prefill_tokens for x in s), sum(x.decode_tokens for x in s), t, s
    )


def test_a_figure_is_resolved_where_its_interval_is_no_wider_than_itself() -> None:
    assert Part(10.0, 0.0).resolved
    assert Part(10.0, 0.0, 5.0).resolved
    assert not Part(10.0, 0.0, 5.01).resolved
    assert Part(-10.0, 0.0, 5.0).resolved
    assert RequestEnergy(1, 10.0, 0.0, 4.0, 6.0).resolved
    assert RequestEnergy(1, 10.0, 0.0, 4.0, 6.0, 5.0).resolved
    assert not RequestEnergy(1, 10.0, 0.0, 4.0, 6.0, 5.01).resolved
    assert RequestEnergy(1, -10.0, 0.0, 4.0, 6.0, 5.0).resolved


def _pure_steps() -> list[EngineStep]:
    """Prefill-only steps (r1: 300 tokens, 20 ms; r3: 100, 12 ms), decode-only steps of one or
    two requests (1 or 2 tokens, 10 ms), each 2 ms apart."""
    plan = [
        ([(1, 300, 0)], 0.020),
        ([(1, 0, 1)], 0.010),
        ([(1, 0, 1), (2, 0, 1)], 0.011),
        ([(3, 100, 0)], 0.012),
        ([(2, 0, 1)], 0.009),
        ([(2, 0, 1), (3, 0, 1)], 0.010),
        ([(1, 200, 0)], 0.018),
        ([(1, 0, 1), (3, 0, 1)], 0.012),
    ]
    out, t = [], 1.0
    for shares, d in plan:
        out.append(_step(t, d, shares))
        t += d + 0.002
    return out


def _planted(cut) -> list[float]:
    out = []
    for span in cut:
        d = span.end_s - span.start_s
        s = span.step
        out.append(P_GAP * d if s is None else A * s.prefill_tokens + B * s.decode_tokens + P * d)
    return out


def test_a_huge_timing_bound_is_capped_at_what_the_window_allows() -> None:
    """No part is below 0 or above the window: a bound of 1 MJ on every span caps at
    max(F, total x (1 + rho) - F)."""
    cut = spans(_pure_steps(), 0.99, 1.15)
    energy = _planted(cut)
    got = attribute(cut, energy, [1e6] * len(cut), scale_relative=0.1, spread=False)
    total = sum(energy)
    prefill = sum(e for e, s in zip(energy, cut, strict=True) if s.step and s.step.prefill_tokens)
    assert got.prefill is not None and got.prefill.energy_j == pytest.approx(prefill)
    assert got.prefill.bound_j == pytest.approx(max(prefill, 1.1 * total - prefill))
    assert got.between is not None
    between = got.between.energy_j
    assert got.between.bound_j == pytest.approx(max(between, 1.1 * total - between))


def test_without_spread_the_bound_is_timing_and_scale_alone_and_there_is_no_interval() -> None:
    """Bounds of 0.01 J on each span: prefill-only steps carry their own spans' bounds (the fit
    is exact, so each span is its own interval's whole energy); scale 5 % of the figure."""
    cut = spans(_pure_steps(), 0.99, 1.15)
    energy = _planted(cut)
    got = attribute(cut, energy, [0.01] * len(cut), scale_relative=0.05, spread=False)
    assert got.split_method == "linear_fit"
    assert got.fit.a.value == pytest.approx(A) and got.fit.p_between.value == pytest.approx(P_GAP)
    assert got.prefill is not None and got.prefill.ci95_j is None
    assert got.coefficient_ci95 == {}
    assert got.interval_null_reason is None
    n_prefill = sum(1 for s in cut if s.step and s.step.prefill_tokens)
    prefill = got.prefill.energy_j
    assert got.prefill.bound_j == pytest.approx(0.01 * n_prefill + 0.05 * prefill)
    spread = attribute(cut, energy, [0.01] * len(cut), scale_relative=0.05)
    assert spread.prefill is not None and spread.prefill.ci95_j is not None
    assert spread.prefill.bound_j >= got.prefill.bound_j
    assert set(spread.coefficient_ci95) >= {"a", "b", "p_static", "p_between"}


def test_the_tokens_the_steps_computed_are_counted() -> None:
    cut = spans(_pure_steps(), 0.99, 1.15)
    got = attribute(cut, _planted(cut), [0.0] * len(cut))
    assert got.prefill_tokens == 600 and got.decode_tokens == 8
    assert got.total_j == pytest.approx(sum(_planted(cut)))
    assert got.span_energy_j == pytest.approx(tuple(_planted(cut)))


def _same_shape() -> list[EngineStep]:
    """Every step decodes 2 tokens in 10 ms: nothing separates the costs."""
    return [_step(1.0 + 0.012 * i, 0.010, [(1, 0, 1), (2, 0, 1)]) for i in range(6)]


def test_a_fit_that_cannot_be_used_over_spans_splits_by_tokens_with_the_reason() -> None:
    cut = spans(_same_shape(), 1.0, 1.072)
    energy = [0.5 if s.step else 0.01 for s in cut]
    got = attribute(cut, energy, [0.0] * len(cut))
    assert got.split_method == TOKEN_SPLIT
    assert got.split_null_reason is not None
    assert got.split_null_reason.startswith("not identified: no step in the window has prefill")
    assert got.interval_null_reason == (
        "no interval: the split is by token share, an assumption the window cannot test, not by "
        "a fitted model"
    )
    assert got.coefficient_ci95 == {}
    assert got.decode is not None and got.decode.energy_j == pytest.approx(3.0)
    assert got.decode.ci95_j is None
    assert got.requests is not None and got.requests[1].energy_j == pytest.approx(1.5)
    assert got.requests[1].decode_j == pytest.approx(1.5) and got.requests[1].prefill_j == 0.0


def test_a_fit_that_cannot_be_used_over_coarse_intervals_leaves_the_split_null() -> None:
    cut = spans(_same_shape(), 1.0, 1.072)
    n = len(cut)
    energy = [0.5 if s.step else 0.01 for s in cut]
    half = n // 2
    groups = ((0, half), (half, n))
    b = Bins(groups, (sum(energy[:half]), sum(energy[half:])), (0.0, 0.0), (0.0,) * 3, 0.025)
    got = attribute(cut, energy, [0.0] * n, bins=b)
    assert got.prefill is None and got.decode is None and got.between is None
    assert got.requests is None and got.unattributed is None and got.span_energy_j is None
    assert got.split_method is None
    assert got.split_null_reason == got.requests_null_reason
    reason = got.split_null_reason or ""
    assert "; the power timeline (resolution 25 ms) is too coarse to read each step's energy, " in (
        reason
    )
    assert reason.endswith(
        f"and the fit over 2 intervals of {b.min_s:.2g} s or more cannot share them"
    )
    assert got.total_j == pytest.approx(sum(energy))
    assert got.decode_tokens == 12


def test_steps_without_their_requests_leave_the_requests_null_with_the_reason() -> None:
    steps = [
        EngineStep(s.end_s, 1, s.prefill_tokens, s.decode_tokens, s.start_s) for s in _pure_steps()
    ]
    cut = spans(steps, 0.99, 1.15)
    got = attribute(cut, _planted(cut), [0.0] * len(cut))
    assert got.requests is None
    assert got.requests_null_reason == "no engine step says which requests ran in it"
    assert got.unattributed is not None
    assert got.unattributed.energy_j == pytest.approx(got.total_j)


def _fit(**c: Coefficient) -> Fit:
    none = Coefficient(None, null_reason="x")
    return Fit(
        c.get("a", none),
        c.get("b", none),
        c.get("p_static", none),
        None,
        10,
        None,
        c.get("p_between", none),
        c.get("k", none),
    )


def test_the_costs_a_split_uses() -> None:
    """A cost below 0 is 0; P_between follows P_static where it is not fitted; k is 0 where it
    is not usable; a fitted value given overrides the fit's."""
    fit = _fit(
        a=Coefficient(0.004, timing_bound=0.0),
        b=Coefficient(None, null_reason="n", timing_bound=0.02, fitted=-0.01),
        p_static=Coefficient(100.0, timing_bound=0.0),
    )
    assert _costs(fit, {}) == (0.004, 0.0, 100.0, 100.0, 0.0)
    assert _costs(fit, {"a": 0.006, "p_static": -3.0}) == (0.006, 0.0, 0.0, 0.0, 0.0)
    fit = _fit(
        a=Coefficient(0.004, timing_bound=0.0),
        b=Coefficient(0.05, timing_bound=0.0),
        p_static=Coefficient(100.0, timing_bound=0.0),
        p_between=Coefficient(30.0, timing_bound=0.0),
        k=Coefficient(0.001, timing_bound=0.0),
    )
    assert _costs(fit, {}) == (0.004, 0.05, 100.0, 30.0, 0.001)
    assert _costs(fit, {"p_between": 20.0, "k": 0.002}) == (0.004, 0.05, 100.0, 20.0, 0.002)


def test_the_bound_box_spans_each_costs_timing_bound_and_stops_at_zero() -> None:
    fit = _fit(
        a=Coefficient(0.004, timing_bound=0.001),
        b=Coefficient(0.05, timing_bound=0.06),
        p_static=Coefficient(100.0, timing_bound=10.0),
    )
    costs, corners, why = _split_model(fit)
    assert why is None and costs == (0.004, 0.05, 100.0, 100.0, 0.0)
    assert len(corners) == 16
    assert sorted({c[0] for c in corners}) == pytest.approx([0.003, 0.005])
    assert sorted({c[1] for c in corners}) == pytest.approx([0.0, 0.11])
    assert {c[2] for c in corners} == {90.0, 110.0}
    assert {c[3] for c in corners} == {0.0, 110.0}  # P_between unfitted: 0 to P_static's top
    assert {c[4] for c in corners} == {0.0}
    fit = _fit(
        a=Coefficient(0.004, timing_bound=0.001),
        b=Coefficient(0.05, timing_bound=0.01),
        p_static=Coefficient(100.0, timing_bound=10.0),
        p_between=Coefficient(30.0, timing_bound=5.0),
        k=Coefficient(0.001, timing_bound=0.0005),
    )
    _, corners, _ = _split_model(fit)
    assert len(corners) == 32
    assert {c[3] for c in corners} == {25.0, 35.0}
    assert sorted({c[4] for c in corners}) == pytest.approx([0.0005, 0.0015])


def test_a_fit_missing_a_cost_splits_by_any_cost_with_the_reasons() -> None:
    fit = _fit(
        a=Coefficient(None, null_reason="no a"),
        b=Coefficient(0.05, timing_bound=0.0),
        p_static=Coefficient(None, null_reason="no P"),
    )
    costs, corners, why = _split_model(fit)
    assert why == "no a; no P"
    assert costs == (1.0, 1.0, 0.0, 0.0, 0.0)
    assert corners == [
        (1.0, 0.0, 0.0, 0.0, 0.0),
        (0.0, 1.0, 0.0, 0.0, 0.0),
        (0.0, 0.0, 1.0, 0.0, 0.0),
    ]


def test_a_cost_whose_whole_bound_is_below_zero_is_not_used() -> None:
    """An unresolved fitted cost of -0.01 whose bound reaches only -0.005: not usable; one
    whose bound reaches +0.01: usable (at 0)."""
    below = Coefficient(None, null_reason="below", timing_bound=0.005, fitted=-0.01)
    reach = Coefficient(None, null_reason="reach", timing_bound=0.02, fitted=-0.01)
    ok = Coefficient(100.0, timing_bound=0.0)
    _, _, why = _split_model(_fit(a=Coefficient(0.004), b=below, p_static=ok))
    assert why == "below"
    costs, _, why = _split_model(_fit(a=Coefficient(0.004), b=reach, p_static=ok))
    assert why is None and costs[1] == 0.0
    # a context cost whose whole bound is below 0 is 0 in the split
    k = Coefficient(None, null_reason="k", timing_bound=0.0005, fitted=-0.001)
    costs, corners, _ = _split_model(_fit(a=Coefficient(0.004), b=reach, p_static=ok, k=k))
    assert costs[4] == 0.0 and {c[4] for c in corners} == {0.0}
    exact = Coefficient(None, null_reason="edge", timing_bound=0.01, fitted=-0.01)
    _, _, why = _split_model(_fit(a=Coefficient(0.004), b=exact, p_static=ok))
    assert why == "edge"  # a bound that reaches exactly 0 is not above it


def test_a_figure_with_no_energy_is_zero_with_a_zero_bound_not_missing() -> None:
    """Decode steps back to back filling the window, each saying its requests: no prefill, no
    time between steps, nothing unattributed, each 0 J with a bound of 0 J."""
    steps = [_step(1.0 + 0.01 * i, 0.01, [(1, 0, 1)] + [(2, 0, 1)] * (i % 2)) for i in range(6)]
    cut = spans(steps, 1.0, 1.06)
    assert all(s.step is not None for s in cut)
    got = attribute(cut, [0.5 + 0.1 * (i % 2) for i in range(len(cut))], [0.0] * len(cut))
    for part in (got.prefill, got.between, got.unattributed):
        assert part == Part(0.0, 0.0)
    assert got.decode is not None and got.decode.energy_j == pytest.approx(got.total_j)

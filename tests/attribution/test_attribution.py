"""The attribution's arithmetic (llem.figures.attribution, llem.figures.energy_fit) on synthetic
steps whose energies follow a planted model exactly."""

from __future__ import annotations

import pytest

from llem.figures.attribution import TOKEN_SPLIT, attribute, spans
from llem.figures.energy_fit import StepRow, fit_steps
from llem.vocabulary.workload import EngineStep, StepShare

A, B, P = 0.004, 0.05, 120.0  # J/prefill token, J/decode token, W


def _step(t: float, d: float, shares: list[tuple[int, int, int]]) -> EngineStep:
    s = tuple(StepShare(r, p, q) for r, p, q in shares)
    return EngineStep(
        t + d, len(s), sum(x.prefill_tokens for x in s), sum(x.decode_tokens for x in s), t, s
    )


def _energies(cut, idle_w: float = 50.0) -> list[float]:
    out = []
    for span in cut:
        d = span.end_s - span.start_s
        s = span.step
        out.append(idle_w * d if s is None else A * s.prefill_tokens + B * s.decode_tokens + P * d)
    return out


T0, T_TOKEN, T_CONTEXT = 0.010, 5e-5, 1e-5  # a step's fixed s, s per token, s per context token
PLAN = [  # (request, prefill, decode) per step; contexts before each step in the comments
    [(1, 300, 0)],  # r1: 0
    [(1, 0, 1)],  # r1: 300
    [(1, 0, 1), (2, 500, 0)],  # r1: 301, r2: 0
    [(1, 0, 1), (2, 0, 1)],  # r1: 302, r2: 500
    [(1, 0, 1), (2, 0, 1)],  # r1: 303, r2: 501
    [(2, 0, 1)],  # r2: 502
]
CONTEXT = [[0], [300], [301, 0], [302, 500], [303, 501], [502]]


def _duration(i: int) -> float:
    tokens = sum(p + q for _, p, q in PLAN[i])
    return T0 + T_TOKEN * tokens + T_CONTEXT * sum(CONTEXT[i])


def _time_share(i: int, j: int) -> float:
    """Share j's part of step i's time, as planted: the fixed time by tokens, then its own."""
    tokens = sum(p + q for _, p, q in PLAN[i])
    _, p, q = PLAN[i][j]
    own = (T0 / tokens + T_TOKEN) * (p + q) + T_CONTEXT * CONTEXT[i][j]
    return own / _duration(i)


def _mixed_schedule() -> list[EngineStep]:
    """Two requests: r1 prefills alone, decodes; r2 joins (prefill beside r1's decode); each
    step lasts as the planted pace says."""
    steps, t = [], 1.0
    for i, shares in enumerate(PLAN):
        d = _duration(i)
        steps.append(_step(t, d, shares))
        t += d + 0.002  # a gap between steps
    return steps


def test_planted_costs_are_recovered_and_every_joule_is_accounted_for() -> None:
    cut = spans(_mixed_schedule(), 0.9, 1.3)
    energy = _energies(cut)
    got = attribute(cut, energy, [0.0] * len(cut))
    assert got.fit.a.value == pytest.approx(A)
    assert got.fit.b.value == pytest.approx(B)
    assert got.fit.p_static.value == pytest.approx(P)
    assert got.fit.r2 == pytest.approx(1.0)
    total = sum(energy)
    assert got.prefill.energy_j + got.decode.energy_j + got.between.energy_j == pytest.approx(total)
    assert got.requests is not None
    assert sum(r.energy_j for r in got.requests.values()) + got.unattributed.energy_j == (
        pytest.approx(total)
    )
    # a step shared by two requests splits half by fitted cost (static power by the time each
    # keeps the step busy: the planted pace) and half by that time alone: in the mixed step (r1
    # decodes 1 token, r2 prefills 500) r2 gets half of its prefill and its time's share of the
    # static power, and half of its time's share of the whole step
    static = [P * _duration(i) for i in range(len(PLAN))]
    whole = [sum(A * p + B * q for _, p, q in PLAN[i]) + static[i] for i in range(len(PLAN))]

    def part(i: int, j: int) -> float:
        _, p, q = PLAN[i][j]
        by_cost = A * p + B * q + static[i] * _time_share(i, j)
        return 0.5 * by_cost + 0.5 * whole[i] * _time_share(i, j)

    assert got.requests[2].prefill_j == pytest.approx(part(2, 1))
    r1_decode = whole[1] + sum(part(i, 0) for i in (2, 3, 4))
    assert got.requests[1].decode_j == pytest.approx(r1_decode)
    assert got.prefill_tokens == 800 and got.decode_tokens == 7


def test_the_bound_of_a_mixed_step_covers_a_fit_moved_within_its_coefficients_bounds() -> None:
    cut = spans(_mixed_schedule(), 0.9, 1.3)
    exact = attribute(cut, _energies(cut), [0.0] * len(cut))
    loose = attribute(cut, _energies(cut), [0.5] * len(cut), scale_relative=0.05)
    assert loose.fit.a.bound > exact.fit.a.bound
    assert loose.requests is not None and exact.requests is not None
    for rid, r in loose.requests.items():
        assert r.bound_j > exact.requests[rid].bound_j
        assert r.bound_j >= 0.05 * r.energy_j


def test_a_single_prefill_at_batch_1_with_equal_decode_steps_cannot_identify_the_fit() -> None:
    steps, t = [], 0.0
    for d, shares in [(0.05, [(1, 400, 0)])] + [(0.02, [(1, 0, 1)])] * 10:
        steps.append(_step(t, d, shares))
        t += d
    cut = spans(steps, 0.0, t)
    got = attribute(cut, _energies(cut), [0.0] * len(cut))
    for c in (got.fit.a, got.fit.b, got.fit.p_static):
        assert c.value is None and "not identified" in c.null_reason
    assert got.split_method == TOKEN_SPLIT  # and yet every joule is placed: the steps are pure
    assert got.prefill.energy_j == pytest.approx(A * 400 + P * 0.05)
    assert got.decode.energy_j == pytest.approx(10 * (B + P * 0.02))


def test_an_all_decode_window_leaves_the_prefill_cost_null_with_the_reason() -> None:
    rows = [StepRow(0, q, 0.01 + 0.0003 * q + 0.001 * (q % 3)) for q in range(4, 40, 3)]
    energy = [B * r.decode_tokens + P * r.duration_s for r in rows]
    fit = fit_steps(rows, energy, [0.0] * len(rows))
    assert fit.a.value is None
    assert fit.a.null_reason == "not identified: no step in the window has prefill tokens"
    assert fit.b.value == pytest.approx(B) and fit.p_static.value == pytest.approx(P)


def test_steps_that_do_not_say_which_requests_ran_leave_requests_null() -> None:
    steps = [EngineStep(0.02 * (i + 1), 4, 0, 4) for i in range(20)]  # no starts, no shares
    cut = spans(steps, 0.0, 0.5)
    assert cut[0].start_s == 0.0 and cut[1].start_s == pytest.approx(0.02)  # previous end
    got = attribute(cut, [1.0] * len(cut), [0.0] * len(cut))
    assert got.requests is None and got.requests_null_reason
    assert got.unattributed.energy_j == pytest.approx(sum([1.0] * len(cut)))


def test_a_step_that_computed_no_token_is_decode_shared_by_the_context_its_requests_read() -> None:
    """r1 holds 304 tokens of context, r2 503: the step that computed nothing (and lasted as the
    planted pace says) is decode, r1's part 304 / 807 of it."""
    steps = _mixed_schedule()
    d = T0 + T_CONTEXT * (304 + 503)
    idle = _step(steps[-1].end_s + 0.002, d, [(1, 0, 0), (2, 0, 0)])
    cut = spans([*steps, idle], 0.9, 1.3)
    energy = _energies(cut)
    got = attribute(cut, energy, [0.0] * len(cut))
    base_cut = spans(steps, 0.9, 1.3)
    base = attribute(base_cut, _energies(base_cut), [0.0] * len(base_cut))
    assert got.prefill.energy_j == pytest.approx(base.prefill.energy_j)  # none of it is prefill
    idle_j = P * d
    assert got.requests[1].decode_j - base.requests[1].decode_j == pytest.approx(idle_j * 304 / 807)
    assert got.requests[2].prefill_j == pytest.approx(base.requests[2].prefill_j)


def test_a_requests_context_restarts_when_it_is_prefilled_again_after_decoding() -> None:
    """r1 prefills 100 tokens in two chunks, decodes twice, is preempted and recomputes its 102
    tokens: its context before each step is what its KV cache held, from 0 again at the
    recompute; r2 beside it keeps counting."""
    from llem.figures.step_shares import contexts

    plan = [
        [(1, 60, 0), (2, 10, 0)],
        [(1, 40, 0), (2, 0, 1)],
        [(1, 0, 1), (2, 0, 1)],
        [(1, 0, 1)],
        [(1, 102, 0), (2, 0, 1)],
        [(1, 0, 1)],
    ]
    steps = [_step(0.1 * i, 0.05, shares) for i, shares in enumerate(plan)]
    assert contexts(steps) == [(0, 0), (60, 10), (100, 11), (101,), (0, 12), (102,)]

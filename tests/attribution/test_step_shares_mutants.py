"""How the step model shares energy (llem.figures.step_shares) on steps and costs planted by
hand: the cases mutation testing found no test for (scripts/mutation.py). Every expected figure
is worked out here from the planted numbers and the module's docstring."""

from __future__ import annotations

import pytest

from llem.figures.bins import Bins
from llem.figures.energy_fit import StepRow
from llem.figures.share_weights import Sharing
from llem.figures.step_shares import (
    TIME_SHARE,
    TOKEN_PACE,
    Coefficients,
    IntervalWeights,
    StepSpan,
    contexts,
    fractions,
    interval_rows,
    spans,
    step_pace,
)
from llem.vocabulary.workload import EngineStep, StepShare


def weights_of(
    cut: list[StepSpan], b: Bins, c: Coefficients, within: Coefficients | None = None
) -> IntervalWeights:
    return Sharing(cut, b).weights(c, within)


def shares_in(cut: list[StepSpan], lo: int, hi: int, c: Coefficients) -> list[float]:
    """Each span's share of the interval of spans ``lo`` to ``hi`` (end excluded)."""
    one = Bins(((lo, hi),), (1.0,), (0.0,), (0.0, 0.0), 0.1)
    return [float(g) for g in Sharing(cut, one).span_shares(c)]


def _step(start: float | None, end: float, shares: list[tuple[int, int, int]]) -> EngineStep:
    s = tuple(StepShare(r, p, q) for r, p, q in shares)
    return EngineStep(
        end, len(s), sum(x.prefill_tokens for x in s), sum(x.decode_tokens for x in s), start, s
    )


def test_a_window_is_cut_into_its_steps_and_the_gaps_between_them() -> None:
    """A step before the window and one ending after it are left out; a step without a start
    begins where the previous ended; a start before the previous end is moved to it; a step
    ending exactly at the window's end is in it, one ending at its start is not."""
    steps = [
        _step(0.5, 1.0, [(9, 0, 1)]),  # ends at t0: out
        _step(1.1, 1.2, [(1, 10, 0)]),
        _step(None, 1.3, [(1, 0, 1)]),  # starts at 1.2
        _step(1.25, 1.4, [(1, 0, 1)]),  # starts before 1.3: moved to it
        _step(1.5, 2.0, [(1, 0, 1)]),  # ends at t1: in
        _step(2.0, 2.1, [(1, 0, 1)]),  # ends after t1: out
    ]
    cut = spans(steps, 1.0, 2.0)
    got = [(s.start_s, s.end_s, s.step is not None) for s in cut]
    assert got == [
        (1.0, 1.1, False),
        (1.1, 1.2, True),
        (1.2, 1.3, True),
        (1.3, 1.4, True),
        (1.4, 1.5, False),
        (1.5, 2.0, True),
    ]
    # the contexts count every step before, the one before the window too (request 9 alone)
    assert [s.context for s in cut if s.step] == [(0,), (10,), (11,), (12,)]


def test_a_window_with_no_step_is_one_gap_and_a_step_starting_after_its_end_is_clipped() -> None:
    assert [(s.start_s, s.end_s) for s in spans([], 0.0, 1.0)] == [(0.0, 1.0)]
    cut = spans([_step(0.9, 0.8, [(1, 5, 0)])], 0.0, 1.0)  # start after end: moved to the end
    assert [(s.start_s, s.end_s, s.step is None) for s in cut] == [
        (0.0, 0.8, True),
        (0.8, 0.8, False),
        (0.8, 1.0, True),
    ]
    # a window that ends at the last step's end has no gap after it
    assert len(spans([_step(0.2, 1.0, [(1, 5, 0)])], 0.0, 1.0)) == 2


def test_a_requests_context_is_its_tokens_before_and_restarts_when_prefilled_again() -> None:
    steps = [
        _step(0.0, 0.1, [(1, 100, 0)]),
        _step(0.1, 0.2, [(1, 50, 0), (2, 30, 0)]),  # chunked prefill: no restart
        _step(0.2, 0.3, [(1, 0, 1), (2, 0, 1)]),
        _step(0.3, 0.4, [(1, 151, 0), (2, 0, 1)]),  # 1 preempted: recomputed from 0
        _step(0.4, 0.5, [(1, 0, 1), (2, 0, 1)]),
        _step(0.5, 0.6, []),
    ]
    assert contexts(steps) == [(0,), (100, 0), (150, 30), (0, 31), (151, 32), ()]


def _paced(n: int, t0: float, tp: float, tq: float, tx: float) -> list[StepSpan]:
    """n steps whose durations are the planted pace over varied tokens and contexts."""
    out, t = [], 0.0
    for i in range(n):
        p, q, ctx = (37 * i) % 200, 1 + (11 * i) % 16, (53 * i * i) % 900
        d = t0 + tp * p + tq * q + tx * ctx
        out.append(StepSpan(t, t + d, _step(t, t + d, [(1, p, q)]), (ctx,)))
        t += d
    return out


def test_the_planted_pace_of_the_steps_is_found() -> None:
    pace = step_pace(_paced(8, 0.01, 2e-5, 3e-4, 1e-6))
    assert pace == pytest.approx((0.01, 2e-5, 3e-4, 1e-6), rel=1e-6)
    # the gaps between steps do not enter
    cut = _paced(8, 0.01, 2e-5, 3e-4, 1e-6)
    gapped = [x for s in cut for x in (StepSpan(s.start_s - 0.5, s.start_s, None), s)]
    assert step_pace(gapped) == pytest.approx((0.01, 2e-5, 3e-4, 1e-6), rel=1e-6)


def test_a_pace_below_zero_is_taken_as_zero() -> None:
    pace = step_pace(_paced(8, 0.01, 2e-5, 3e-4, -1e-6))
    assert pace[3] == 0.0 and pace[0] > 0


def test_too_few_steps_or_steps_of_one_shape_share_by_tokens() -> None:
    assert step_pace(_paced(4, 0.01, 2e-5, 3e-4, 1e-6)) == TOKEN_PACE
    assert len(_paced(5, 0.01, 2e-5, 3e-4, 1e-6)) == 5
    assert step_pace(_paced(5, 0.01, 2e-5, 3e-4, 1e-6)) == pytest.approx(
        (0.01, 2e-5, 3e-4, 1e-6), rel=1e-6
    )
    same = [StepSpan(i, i + 0.01, _step(i, i + 0.01, [(1, 0, 4)]), (10,)) for i in range(8)]
    assert step_pace(same) == TOKEN_PACE


def test_a_pace_whose_tokens_take_no_time_shares_by_tokens() -> None:
    """No fixed time, and one kind of token free: t0 + min(tp, tq) is 0."""
    assert step_pace(_paced(8, 0.0, 0.0, 3e-4, 1e-6)) == TOKEN_PACE
    assert step_pace(_paced(8, 0.0, 2e-5, 3e-4, 1e-6)) == pytest.approx(
        (0.0, 2e-5, 3e-4, 1e-6), abs=1e-12
    )


def test_an_intervals_row_sums_its_steps_and_its_gaps() -> None:
    cut = [
        StepSpan(0.0, 0.1, None),
        StepSpan(0.1, 0.3, _step(0.1, 0.3, [(1, 10, 0), (2, 0, 1)]), (0, 40)),
        StepSpan(0.3, 0.35, None),
        StepSpan(0.35, 0.5, _step(0.35, 0.5, [(1, 0, 1), (2, 0, 1)]), (10, 41)),
        StepSpan(0.5, 0.6, None),
    ]
    rows = interval_rows(cut, [(0, 4), (4, 5)])
    assert rows[0].prefill_tokens == 10 and rows[0].decode_tokens == 3
    assert rows[0].context_tokens == 91
    assert rows[0].duration_s == pytest.approx(0.35)
    assert rows[0].between_s == pytest.approx(0.15)
    assert rows[1] == StepRow(0, 0, 0.0, pytest.approx(0.1), 0)


ROW = StepRow(100, 10, 0.1)
C = (0.004, 0.05, 110.0, 0.0, 0.001)  # a, b, P_static, P_between, k


def test_a_steps_parts_share_their_tokens_costs_and_its_static_power_by_token_share() -> None:
    """Static 110 W x 0.1 s over 110 tokens: 0.1 J a token. Prefill: 0.4 + 10 J; decode:
    0.5 + 1 J, and 0.2 J for its 200 context tokens."""
    got = fractions([(100, 0, 0), (0, 10, 200)], ROW, C)
    assert got == pytest.approx([10.4 / 12.1, 1.7 / 12.1])


def test_a_steps_static_power_follows_the_time_each_part_keeps_it_busy() -> None:
    """Pace: 11 ms fixed (0.1 ms a token), 0.2 ms a prefill token, 1 ms a decode token,
    0.05 ms a context token: prefill 30 ms, decode 11 + 10 = 21 ms; static 11 J over 51 ms."""
    pace = (0.011, 2e-4, 1e-3, 5e-5)
    got = fractions([(100, 0, 0), (0, 10, 200)], ROW, C, pace=pace)
    pre = 0.4 + 11.0 * 0.030 / 0.051
    dec = 0.5 + 0.2 + 11.0 * 0.021 / 0.051
    assert got == pytest.approx([pre / (pre + dec), dec / (pre + dec)])


def test_costs_that_give_a_step_nothing_share_it_by_tokens_then_equally() -> None:
    zero = (0.0, 0.0, 0.0, 0.0, 0.0)
    assert fractions([(30, 0, 0), (0, 10, 5)], ROW, zero) == pytest.approx([0.75, 0.25])
    idle = StepRow(0, 0, 0.1)
    assert fractions([(0, 0, 0), (0, 0, 0), (0, 0, 0)], idle, C) == pytest.approx([1 / 3] * 3)
    got = fractions([(0, 0, 0)] * 4, idle, C, idle=[False, True, False, True])
    assert got == pytest.approx([0.0, 0.5, 0.0, 0.5])
    got = fractions([(0, 0, 0)] * 2, idle, C, idle=[False, False])
    assert got == pytest.approx([0.5, 0.5])


def test_a_step_that_computed_no_token_shares_its_static_power_by_the_context_read() -> None:
    """No token: the fixed time has no token to go to; 100 and 300 context tokens read."""
    pace = (0.01, 0.0, 0.0, 1e-4)
    got = fractions([(0, 0, 100), (0, 0, 300)], StepRow(0, 0, 0.04), C, pace=pace)
    assert got == pytest.approx([0.25, 0.75])


def _two_span_interval() -> list[StepSpan]:
    return [
        StepSpan(0.0, 0.1, _step(0.0, 0.1, [(1, 100, 0)]), (0,)),
        StepSpan(0.1, 0.4, None),
    ]


def test_an_intervals_spans_share_its_energy_by_their_fitted_costs() -> None:
    """The step: 100 x 0.004 + 0.1 s x 110 W = 11.4 J; the gap: 0.3 s x 20 W = 6 J."""
    cut = _two_span_interval()
    c = (0.004, 0.05, 110.0, 20.0, 0.001)
    assert shares_in(cut, 0, 2, c) == pytest.approx([11.4 / 17.4, 6.0 / 17.4])
    assert shares_in(cut, 0, 1, c) == [1.0]
    assert shares_in(cut, 1, 2, c) == [1.0]
    ctx = [StepSpan(0.0, 0.1, _step(0.0, 0.1, [(1, 0, 1)]), (1000,)), StepSpan(0.1, 0.2, None)]
    assert shares_in(ctx, 0, 2, (0.0, 0.0, 0.0, 1.0, 0.001)) == pytest.approx([10 / 11, 1 / 11])


def test_costs_that_give_an_interval_nothing_share_it_by_duration_then_equally() -> None:
    cut = _two_span_interval()
    assert shares_in(cut, 0, 2, (0.0,) * 5) == pytest.approx([0.25, 0.75])
    flat = [StepSpan(1.0, 1.0, None), StepSpan(1.0, 1.0, None), StepSpan(1.0, 1.0, None)]
    assert shares_in(flat, 0, 3, (0.0,) * 5) == pytest.approx([1 / 3] * 3)


def test_each_figure_takes_its_share_of_each_intervals_energy() -> None:
    """One interval: a mixed step (r1 decodes 1 token reading 300, r2 prefills 100) and a gap.
    Step: 0.4 + 0.05 + 0.3 (context) + 11 (static, 0.1 s) = 11.75 J of 17.75 J with the gap's
    6 J; within the step, by token share of the static 11 J over 101 tokens."""
    step = _step(0.0, 0.1, [(1, 0, 1), (2, 100, 0)])
    cut = [StepSpan(0.0, 0.1, step, (300, 0)), StepSpan(0.1, 0.4, None)]
    b = Bins(((0, 2),), (17.75,), (0.0,), (0.0, 0.0), 0.1)
    c = (0.004, 0.05, 110.0, 20.0, 0.001)
    w = weights_of(cut, b, c)
    g_step, g_gap = 11.75 / 17.75, 6.0 / 17.75
    pre = (0.4 + 11.0 * 100 / 101) / 11.75
    dec = (0.05 + 0.3 + 11.0 / 101) / 11.75
    assert w[("between", 0)] == pytest.approx({0: g_gap})
    assert w[("unattributed", 0)] == pytest.approx({0: g_gap})
    assert w[("prefill", 0)] == pytest.approx({0: g_step * pre})
    assert w[("decode", 0)] == pytest.approx({0: g_step * dec})
    assert w[("req", 1)] == pytest.approx({0: g_step * dec})
    assert w[("req_decode", 1)] == pytest.approx({0: g_step * dec})
    assert w[("req", 2)] == pytest.approx({0: g_step * pre})
    assert w[("req_prefill", 2)] == pytest.approx({0: g_step * pre})
    assert ("req_prefill", 1) not in w and ("req_decode", 2) not in w
    # within the step by time alone (token share here): the spans still by the fitted costs
    t = weights_of(cut, b, c, within=TIME_SHARE)
    assert t[("prefill", 0)] == pytest.approx({0: g_step * 100 / 101})
    assert t[("req", 1)] == pytest.approx({0: g_step / 101})
    assert t[("between", 0)] == pytest.approx({0: g_gap})


def test_each_figures_value_is_its_weight_on_each_intervals_energy() -> None:
    """The mixed step and the gap above share interval 0 (17.75 J); a gap alone is interval 1
    (3 J): each figure's value is its weights times those energies, worked out by hand."""
    step = _step(0.0, 0.1, [(1, 0, 1), (2, 100, 0)])
    cut = [StepSpan(0.0, 0.1, step, (300, 0)), StepSpan(0.1, 0.4, None), StepSpan(0.4, 0.5, None)]
    b = Bins(((0, 2), (2, 3)), (17.75, 3.0), (0.0, 0.0), (0.0, 0.0, 0.0), 0.1)
    v = Sharing(cut, b).values((0.004, 0.05, 110.0, 20.0, 0.001))
    pre = 0.4 + 11.0 * 100 / 101  # J: of the step's 11.75 J, as the interval's share is 11.75
    dec = 0.05 + 0.3 + 11.0 / 101
    assert v[("prefill", 0)] == pytest.approx(pre)
    assert v[("decode", 0)] == pytest.approx(dec)
    assert v[("between", 0)] == pytest.approx(6.0 + 3.0)
    assert v[("unattributed", 0)] == pytest.approx(6.0 + 3.0)
    assert v[("req", 2)] == pytest.approx(pre) and v[("req_prefill", 2)] == pytest.approx(pre)
    assert v[("req", 1)] == pytest.approx(dec) and v[("req_decode", 1)] == pytest.approx(dec)
    assert ("req_prefill", 1) not in v and ("req_decode", 2) not in v


def test_a_prefill_reading_context_charges_it_to_prefill() -> None:
    """r1 prefills a second chunk of 100 over its first 100 (context 100) beside r2's decode
    (context 0): prefill 0.4 + 0.1 J, decode 0.05 J, no static power (P = 0)."""
    step = _step(0.0, 0.1, [(1, 100, 0), (2, 0, 1)])
    cut = [StepSpan(0.0, 0.1, step, (100, 0))]
    b = Bins(((0, 1),), (1.0,), (0.0,), (0.0, 0.0), 0.1)
    w = weights_of(cut, b, (0.004, 0.05, 0.0, 0.0, 0.001))
    assert w[("prefill", 0)] == pytest.approx({0: 0.5 / 0.55})
    assert w[("decode", 0)] == pytest.approx({0: 0.05 / 0.55})
    assert w[("req_prefill", 1)] == pytest.approx({0: 0.5 / 0.55})


def test_a_step_that_does_not_say_which_requests_ran_is_unattributed() -> None:
    step = EngineStep(0.1, 2, 100, 1, 0.0, None)
    cut = [StepSpan(0.0, 0.1, step, ()), StepSpan(0.1, 0.2, None)]
    b = Bins(((0, 1), (1, 2)), (5.0, 2.0), (0.0, 0.0), (0.0, 0.0, 0.0), 0.1)
    w = weights_of(cut, b, (0.004, 0.05, 0.0, 20.0, 0.0))
    assert w[("unattributed", 0)] == {0: 1.0, 1: 1.0}
    assert w[("prefill", 0)] == pytest.approx({0: 0.4 / 0.45})
    assert w[("between", 0)] == {1: 1.0}
    assert not any(k[0].startswith("req") for k in w)


def test_a_preempted_requests_recompute_in_chunks_restarts_its_context_once() -> None:
    """r1 prefills 100, decodes 1, is preempted and recomputes its 101 tokens in two chunks of
    60 and 41: the first chunk starts from 0, the second continues from 60."""
    steps = [
        _step(0.0, 0.1, [(1, 100, 0)]),
        _step(0.1, 0.2, [(1, 0, 1)]),
        _step(0.2, 0.3, [(1, 60, 0)]),
        _step(0.3, 0.4, [(1, 41, 0)]),
        _step(0.4, 0.5, [(1, 0, 1)]),
    ]
    assert contexts(steps) == [(0,), (100,), (0,), (60,), (101,)]


def test_one_token_in_a_step_costs_nothing_goes_to_its_part() -> None:
    zero = (0.0, 0.0, 0.0, 0.0, 0.0)
    assert fractions([(1, 0, 0), (0, 0, 0)], ROW, zero) == pytest.approx([1.0, 0.0])


def test_an_interval_whose_costs_sum_below_one_joule_is_still_shared_by_them() -> None:
    """The step reads 400 context tokens at 1 mJ: 0.4 J; the gap 0.1 s at 1 W: 0.1 J."""
    cut = [StepSpan(0.0, 0.1, _step(0.0, 0.1, [(1, 0, 1)]), (400,)), StepSpan(0.1, 0.2, None)]
    assert shares_in(cut, 0, 2, (0.0, 0.0, 0.0, 1.0, 0.001)) == pytest.approx([0.8, 0.2])
    flat = [StepSpan(1.0, 1.0, None)] * 3
    assert shares_in(flat, 1, 3, (0.0,) * 5) == pytest.approx([0.5, 0.5])


def test_a_step_that_computed_no_token_and_costs_nothing_is_decode_shared_equally() -> None:
    """Two requests ran a step computing no token, reading no context at a cost, with no
    static power: the step is decode, half to each request."""
    step = _step(0.0, 0.1, [(1, 0, 0), (2, 0, 0)])
    cut = [StepSpan(0.0, 0.1, step, (50, 70))]
    b = Bins(((0, 1),), (2.0,), (0.0,), (0.0, 0.0), 0.1)
    w = weights_of(cut, b, (0.004, 0.05, 0.0, 0.0, 0.0))
    assert w[("decode", 0)] == {0: 1.0} and ("prefill", 0) not in w
    assert w[("req_decode", 1)] == pytest.approx({0: 0.5})
    assert w[("req_decode", 2)] == pytest.approx({0: 0.5})
    assert ("req_prefill", 1) not in w and ("req_prefill", 2) not in w


def test_a_step_without_its_requests_leaves_the_rest_of_its_interval_shared() -> None:
    """One interval: a step that does not say which requests ran, then one that does."""
    cut = [
        StepSpan(0.0, 0.1, EngineStep(0.1, 1, 0, 1, 0.0, None), ()),
        StepSpan(0.1, 0.2, _step(0.1, 0.2, [(7, 0, 1)]), (10,)),
    ]
    b = Bins(((0, 2),), (2.0,), (0.0,), (0.0, 0.0), 0.1)
    w = weights_of(cut, b, (0.0, 0.05, 0.0, 0.0, 0.0))
    assert w[("unattributed", 0)] == pytest.approx({0: 0.5})
    assert w[("req", 7)] == pytest.approx({0: 0.5})

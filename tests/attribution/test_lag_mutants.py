"""The sensor lag's helpers (llem.runner.lag) on planted misfits and figures, worked out by hand:
the cases mutation testing found no test for (scripts/mutation.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from llem.figures.attribution import Part, RequestEnergy, attribute, spans
from llem.runner.lag import CANDIDATES_S, GRID_S, _vertex, lag_range, shifted, with_lag_spread
from llem.vocabulary.workload import EngineStep, StepShare


def test_the_grid_is_0_to_400_ms_by_25_ms() -> None:
    assert GRID_S == 0.025
    assert len(CANDIDATES_S) == 17 and CANDIDATES_S[-1] == pytest.approx(0.4)


def test_the_vertex_of_the_parabola_through_the_best_lag_and_its_neighbours() -> None:
    """Misfits 4, 1, 2 at 25, 50, 75 ms: curvature 4 - 2 + 2 = 4, the vertex 0.5 x 25 ms x
    (4 - 2) / 4 = 6.25 ms after 50 ms."""
    fits = {CANDIDATES_S[1]: 4.0, CANDIDATES_S[2]: 1.0, CANDIDATES_S[3]: 2.0}
    assert _vertex(CANDIDATES_S[2], fits) == pytest.approx(0.05625)
    fits = {CANDIDATES_S[1]: 2.0, CANDIDATES_S[2]: 1.0, CANDIDATES_S[3]: 4.0}
    assert _vertex(CANDIDATES_S[2], fits) == pytest.approx(0.04375)


def test_the_best_lag_stays_where_no_parabola_can_be_drawn() -> None:
    flat = {CANDIDATES_S[1]: 1.0, CANDIDATES_S[2]: 1.0, CANDIDATES_S[3]: 1.0}
    assert _vertex(CANDIDATES_S[2], flat) == CANDIDATES_S[2]
    assert _vertex(CANDIDATES_S[2], {CANDIDATES_S[2]: 1.0, CANDIDATES_S[3]: 2.0}) == 0.05
    assert _vertex(CANDIDATES_S[2], {CANDIDATES_S[1]: 2.0, CANDIDATES_S[2]: 1.0}) == 0.05
    ends = {k: 1.0 + i for i, k in enumerate(CANDIDATES_S)}
    assert _vertex(0.0, ends) == 0.0
    assert (
        _vertex(CANDIDATES_S[-1], {k: 20.0 - i for i, k in enumerate(CANDIDATES_S)})
        == (CANDIDATES_S[-1])
    )


def test_the_lags_range_holds_those_within_the_profile_likelihoods_95_percent() -> None:
    """10 intervals: a lag is kept while its misfit is within exp(3.841 / 10) = 1.468 of the
    least: 1.4 is, 1.5 is not; and at least half a grid step either side, never below 0."""
    fits = {0.0: (2.0, 10), 0.025: (1.0, 10), 0.05: (1.4, 10), 0.075: (1.5, 10)}
    assert lag_range(fits, 0.03) == pytest.approx((0.0175, 0.05))
    assert lag_range({0.0: (1.0, 10)}, 0.0) == pytest.approx((0.0, 0.0125))
    assert lag_range({0.1: (1.0, 10)}, 0.1) == pytest.approx((0.0875, 0.1125))
    # over 40 intervals the same misfits tell more apart: exp(3.841 / 40) = 1.10
    fits = {0.025: (1.0, 40), 0.05: (1.09, 40), 0.075: (1.12, 40)}
    assert lag_range(fits, 0.025) == pytest.approx((0.0125, 0.05))


def test_steps_are_moved_later_and_none_past_the_window() -> None:
    s = [EngineStep(1.0, 1, 5, 0, 0.9, (StepShare(1, 5, 0),)), EngineStep(2.0, 1, 0, 1, None)]
    got = shifted(s, 0.1, 2.05)
    assert got[0].end_s == pytest.approx(1.1) and got[0].start_s == pytest.approx(1.0)
    assert got[0].prefill_tokens == 5 and got[0].shares == s[0].shares and got[0].running == 1
    assert got[1].end_s == 2.05 and got[1].start_s is None and got[1].decode_tokens == 1
    late = shifted([EngineStep(2.0, 1, 0, 1, 1.99)], 0.1, 2.05)[0]
    assert late.end_s == 2.05 and late.start_s == 2.05  # its start past the end: moved to it
    assert shifted(s, 0.0, 2.05) == s


def _attribution():
    steps, t = [], 1.0
    for shares, d in [([(1, 300, 0)], 0.02), ([(1, 0, 1)], 0.01), ([(1, 0, 1), (2, 40, 0)], 0.012)]:
        s = tuple(StepShare(r, p, q) for r, p, q in shares)
        steps.append(
            EngineStep(
                t + d,
                len(s),
                sum(x.prefill_tokens for x in s),
                sum(x.decode_tokens for x in s),
                t,
                s,
            )
        )
        t += d + 0.002
    cut = spans(steps, 0.99, t)
    return attribute(cut, [1.0 + i for i in range(len(cut))], [0.0] * len(cut))


def test_each_figures_interval_widens_by_how_far_it_moves_at_the_other_lags() -> None:
    """Half-width 3 J, the figure 4 J away at another lag: hypot(3, 4) = 5 J; the furthest of
    the other lags counts; a figure without an interval keeps none."""
    att = _attribution()
    att = dataclasses.replace(
        att,
        prefill=Part(10.0, 1.0, 3.0),
        decode=Part(5.0, 1.0, None),
        between=Part(2.0, 0.5, 1.0),
        unattributed=Part(2.0, 0.5, 0.0),
        requests={
            1: RequestEnergy(1, 8.0, 1.0, 6.0, 2.0, 6.0),
            2: RequestEnergy(2, 3.0, 1.0, 3.0, 0.0),
        },
    )
    near = dataclasses.replace(
        att,
        prefill=Part(14.0, 1.0, 3.0),
        decode=Part(9.0, 1.0, 1.0),
        between=Part(2.0, 0.5, 1.0),
        unattributed=None,
        requests={1: RequestEnergy(1, 0.0, 1.0, 0.0, 0.0, 1.0)},
    )
    nearer = dataclasses.replace(att, prefill=Part(11.0, 1.0, 3.0), requests=None)
    got = with_lag_spread(att, [nearer, near])
    assert got.prefill is not None and got.prefill.ci95_j == pytest.approx(5.0)
    assert got.prefill.energy_j == 10.0 and got.prefill.bound_j == 1.0
    assert got.decode is not None and got.decode.ci95_j is None
    assert got.between is not None and got.between.ci95_j == pytest.approx(1.0)
    assert got.unattributed is not None and got.unattributed.ci95_j == pytest.approx(0.0)
    assert got.requests is not None
    assert got.requests[1].ci95_j == pytest.approx(10.0)  # hypot(6, 8)
    assert got.requests[2].ci95_j is None
    assert with_lag_spread(att, []) is att
    assert with_lag_spread(dataclasses.replace(att, requests=None), [near]).requests is None
    assert math.isclose(with_lag_spread(att, [att]).prefill.ci95_j or 0.0, 3.0)

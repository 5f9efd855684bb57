"""Where the fit cannot be used the split falls back to token share, and each part's bound then
covers the split under any costs a, b, P_static >= 0: a step mixing one request's long prefill
with another's decode token is split by tokens, and the planted truth (a 4 mJ prefill token, a
50 mJ decode token) lies inside the bound, not outside a bound of the measurement alone."""

from __future__ import annotations

from llem.figures.attribution import TOKEN_SPLIT, attribute, spans
from llem.vocabulary.workload import EngineStep, StepShare

A, B, P_STATIC, D = 0.004, 0.05, 120.0, 0.01


def test_a_token_share_split_is_bounded_by_every_split_the_costs_allow() -> None:
    step = EngineStep(1.0 + D, 2, 100, 1, 1.0, (StepShare(0, 100, 0), StepShare(1, 0, 1)))
    cut = spans([step], 1.0, 1.0 + D)
    energy = A * 100 + B * 1 + P_STATIC * D  # measured exactly: no timing or scale error
    got = attribute(cut, [energy], [0.0])
    assert got.split_method == TOKEN_SPLIT  # one step: the fit identifies nothing
    assert got.requests is not None
    truth = {0: A * 100 + P_STATIC * D * 100 / 101, 1: B + P_STATIC * D / 101}
    for rid, r in got.requests.items():
        assert abs(r.energy_j - truth[rid]) <= r.bound_j, (rid, r, truth[rid])
        assert r.bound_j <= energy
    # the phases: prefill could have cost all of the step, or none of it
    assert got.prefill.bound_j >= max(got.prefill.energy_j, energy - got.prefill.energy_j) - 1e-12

"""The draft's energy against the verification's (``llem.figures.draft_energy``) on hand-built
windows whose powers are planted: spans cut as the engine recorded them, intervals closed at
whole steps, the per-span sum where each span is its own interval, the fit where intervals mix,
and null with the reason where they cannot be told apart."""

from __future__ import annotations

import pytest

from llem.figures.bins import Bins, per_span
from llem.figures.draft_energy import DRAFT, OTHER, VERIFICATION, WorkSpan, cut, cycles, split

P_DRAFT, P_VERIFY, P_OTHER = 250.0, 420.0, 70.0
WATTS = {DRAFT: P_DRAFT, VERIFICATION: P_VERIFY, OTHER: P_OTHER}


def _steps(ks: list[int], t0: float = 0.0) -> tuple[list[tuple[float, float]], ...]:
    """Drafts of 2 ms + 3 ms per token, verifications of 16 ms + 1 ms per token, 1 ms between."""
    draft, verify, t = [], [], t0 + 0.1
    for k in ks:
        end = t + 0.002 + 0.003 * k
        draft.append((t, end))
        t = end + 0.016 + 0.001 * k
        verify.append((end, t))
        t += 0.001
    return draft, verify


def _bins(spans: list[WorkSpan], groups: list[tuple[int, int]]) -> Bins:
    """Each interval's exact energy under the planted powers; no timing error."""
    energy = [sum((s.end_s - s.start_s) * WATTS[s.kind] for s in spans[lo:hi]) for lo, hi in groups]
    n = len(groups)
    return Bins(tuple(groups), tuple(energy), (0.0,) * n, (0.0,) * (n + 1), 0.1)


def test_the_window_is_cut_into_drafts_verifications_and_the_time_between():
    draft, verify = _steps([1, 2])
    pieces = cut(draft, verify, 0.0, 0.2)
    kinds = [OTHER, DRAFT, VERIFICATION, OTHER, DRAFT, VERIFICATION, OTHER]
    assert [p.kind for p in pieces] == kinds
    assert pieces[0].start_s == 0.0 and pieces[-1].end_s == 0.2
    assert pieces[-2].end_s == pytest.approx(verify[-1][1])
    assert all(a.end_s == b.start_s for a, b in zip(pieces, pieces[1:], strict=False))
    clipped = cut(draft, verify, 0.103, 0.11)  # starts inside the first draft
    assert clipped[0] == WorkSpan(0.103, draft[0][1], DRAFT)
    assert clipped[-1].end_s == 0.11


def test_intervals_close_only_where_a_draft_starts():
    draft, verify = _steps([1, 3, 2, 5, 1, 4])
    pieces = cut(draft, verify, 0.0, verify[-1][1] + 0.1)
    groups = cycles(pieces, 0.05)
    assert groups[0][0] == 0 and groups[-1][1] == len(pieces)
    for lo, _ in groups[1:]:
        assert pieces[lo].kind == DRAFT
    assert all(a[1] == b[0] for a, b in zip(groups, groups[1:], strict=False))
    assert cycles(pieces, 0.0) == [(i, i + 1) for i in range(len(pieces))]


def test_where_each_span_is_its_own_interval_the_spans_are_summed():
    draft, verify = _steps([1, 4, 2, 6])
    pieces = cut(draft, verify, 0.0, 0.3)
    energy = [(s.end_s - s.start_s) * WATTS[s.kind] for s in pieces]
    got = split(pieces, per_span(energy, [0.0] * len(energy)), 0.0)
    d_s = sum(b - a for a, b in draft)
    assert got.draft is not None and got.verification is not None
    assert got.draft.energy_j == pytest.approx(P_DRAFT * d_s, rel=1e-12)
    assert got.verification.energy_j == pytest.approx(
        P_VERIFY * sum(b - a for a, b in verify), rel=1e-12
    )
    assert got.method.startswith("per span") and got.draft_s == pytest.approx(d_s)
    assert got.verification_s == pytest.approx(sum(b - a for a, b in verify))
    assert got.window_j == pytest.approx(sum(energy)) and got.n_intervals == len(pieces)
    assert got.null_reason is None


def test_the_fit_recovers_the_planted_powers_where_the_mix_varies():
    ks = [1] * 20 + [6] * 20 + [3] * 20 + [8] * 20 + [2] * 20
    draft, verify = _steps(ks)
    pieces = cut(draft, verify, 0.0, verify[-1][1] + 0.3)
    got = split(pieces, _bins(pieces, cycles(pieces, 0.25)), 0.0)
    assert got.null_reason is None and got.power_w is not None
    assert got.power_w == pytest.approx((P_DRAFT, P_VERIFY, P_OTHER), rel=1e-9)
    assert got.draft is not None and got.verification is not None
    assert got.draft.energy_j == pytest.approx(P_DRAFT * sum(b - a for a, b in draft), rel=1e-9)
    assert got.verification.energy_j == pytest.approx(
        P_VERIFY * sum(b - a for a, b in verify), rel=1e-9
    )
    assert got.method.startswith("least squares")


def test_a_constant_mix_is_null_with_the_reason():
    draft, verify = _steps([4] * 100)
    pieces = cut(draft, verify, 0.0, verify[-1][1] + 0.3)
    got = split(pieces, _bins(pieces, cycles(pieces, 0.25)), 0.0)
    assert got.draft is None and got.verification is None
    assert got.null_reason is not None
    assert got.null_reason.startswith("not separable: every one of the window's")


def test_fewer_intervals_than_powers_is_null_with_the_reason():
    draft, verify = _steps([1, 8])
    pieces = cut(draft, verify, 0.0, verify[-1][1])
    got = split(pieces, _bins(pieces, cycles(pieces, 0.02)), 0.0)
    assert got.draft is None and got.null_reason is not None
    assert "intervals for 3 powers" in got.null_reason


def test_no_draft_in_the_window_is_null():
    pieces = [WorkSpan(0.0, 1.0, OTHER)]
    got = split(pieces, per_span([70.0], [0.0]), 0.0)
    assert got.draft is None and got.null_reason == "no draft and verification ran in the window"


def _spans(*kinds_and_s: tuple[int, float]) -> list[WorkSpan]:
    out, t = [], 0.0
    for kind, d in kinds_and_s:
        out.append(WorkSpan(t, t + d, kind))
        t += d
    return out


def test_an_interval_closes_at_the_first_draft_once_it_is_long_enough():
    """Binary fractions, so lengths are exact: an interval of exactly the minimum closes; a short
    remainder joins the last interval, one of the minimum or more stands alone."""
    o, d, v = OTHER, DRAFT, VERIFICATION
    pieces = _spans((o, 0.5), (d, 0.25), (v, 0.25), (o, 0.125), (d, 0.25), (v, 0.25))
    pieces += _spans((o, 0.125), (d, 0.125), (v, 0.0625))
    assert cycles(pieces, 0.5) == [(0, 1), (1, 4), (4, 9)]
    assert cycles(_spans((o, 0.5), (d, 0.25), (v, 0.25)), 0.5) == [(0, 1), (1, 3)]
    assert cycles(_spans((o, 0.5), (d, 0.25), (v, 0.125)), 0.5) == [(0, 3)]


def test_empty_spans_and_spans_outside_the_window_are_left_out():
    draft = [(0.01, 0.02), (0.1, 0.1), (0.2, 0.21)]  # the second lasts no time
    verify = [(0.02, 0.05), (0.1, 0.15), (0.21, 0.25)]
    pieces = cut(draft, verify, 0.06, 0.25)  # the first step ends before the window
    assert [(p.kind, p.start_s, p.end_s) for p in pieces] == [
        (OTHER, 0.06, 0.1),
        (VERIFICATION, 0.1, 0.15),
        (OTHER, 0.15, 0.2),
        (DRAFT, 0.2, 0.21),
        (VERIFICATION, 0.21, 0.25),  # the window ends with it: no empty span after
    ]


def test_the_per_span_interval_and_bound_carry_each_spans_timing_errors():
    """Each interval's own timing bound (rest) and each edge's moved energy taken as independent
    uniform errors: 1.96 x sqrt(sum of squares / 3); the bound their worst case, plus the
    window's relative bound."""
    pieces = _spans((OTHER, 0.1), (DRAFT, 0.02), (VERIFICATION, 0.03), (OTHER, 0.1))
    energy = (7.0, 5.0, 12.0, 7.0)
    rest = (0.1, 0.2, 0.4, 0.1)
    edges = (0.0, 0.3, 0.5, 0.7, 0.0)  # energy the timeline may move across each edge
    bins = Bins(((0, 1), (1, 2), (2, 3), (3, 4)), energy, rest, edges, 0.0)
    got = split(pieces, bins, 0.01)
    assert got.null_reason is None and got.draft is not None and got.verification is not None
    assert got.draft.energy_j == 5.0 and got.verification.energy_j == 12.0
    # the draft's weights: 0, 1, 0, 0; it moves by what crosses its two edges
    z = 1.959964
    var = 0.3**2 + 0.5**2 + 0.2**2 + (0.01 * 5.0) ** 2
    assert got.draft.ci95_j == pytest.approx(z * (var / 3) ** 0.5, rel=1e-6)
    assert got.draft.bound_j == pytest.approx(0.3 + 0.5 + 0.2 + 0.01 * 5.0, rel=1e-9)
    var_v = 0.5**2 + 0.7**2 + 0.4**2 + (0.01 * 12.0) ** 2
    assert got.verification.ci95_j == pytest.approx(z * (var_v / 3) ** 0.5, rel=1e-6)


def _varied() -> tuple[list[WorkSpan], list[tuple[int, int]], float, float]:
    ks = [1] * 30 + [7] * 30 + [3] * 30 + [8] * 30 + [2] * 30 + [5] * 30
    draft, verify = _steps(ks)
    pieces = cut(draft, verify, 0.0, verify[-1][1] + 0.3)
    d_s = sum(b - a for a, b in draft)
    return pieces, cycles(pieces, 0.25), d_s, sum(b - a for a, b in verify)


def test_on_exact_energies_the_fitted_interval_is_the_windows_relative_bound_alone():
    """No residual, so the coefficients have no spread: the half-width is Student's t over the
    fit's n - 3 degrees of freedom times the relative bound taken as uniform, rho F / sqrt 3."""
    from llem.figures.student_t import t_quantile

    pieces, groups, d_s, _ = _varied()
    got = split(pieces, _bins(pieces, groups), 0.03)
    assert got.draft is not None and got.null_reason is None
    truth = P_DRAFT * d_s
    t = t_quantile(0.975, len(groups) - 3)
    assert got.draft.ci95_j == pytest.approx(t * 0.03 * truth / 3**0.5, rel=1e-6)
    assert got.draft.bound_j == pytest.approx(0.03 * truth, rel=1e-6)  # no timing bound
    assert got.method == (
        f"least squares over {len(groups)} intervals: E = P_draft x s drafting + P_verify x s "
        "verifying + P_other x s otherwise; the draft's energy P_draft x its seconds, the "
        "verification's P_verify x its seconds"
    )


def test_the_fitted_bound_covers_every_error_within_the_intervals_bounds():
    """Each interval's energy moved anywhere within its timing bound (and what crosses its
    edges): the figure moves by no more than its bound."""
    import random

    pieces, groups, _, _ = _varied()
    exact = _bins(pieces, groups)
    n = len(groups)
    rest = tuple(0.02 * e for e in exact.energy_j)
    edges = (0.0, *(0.5,) * (n - 1), 0.0)
    base = split(pieces, Bins(exact.groups, exact.energy_j, rest, edges, 0.1), 0.0)
    assert base.draft is not None and base.verification is not None
    rng = random.Random(1)
    for _ in range(200):
        moved = [rng.uniform(-m, m) for m in edges]  # what crosses each edge, leaving its left
        energy = tuple(
            e + rng.uniform(-r, r) - moved[i + 1] + moved[i]
            for i, (e, r) in enumerate(zip(exact.energy_j, rest, strict=True))
        )
        got = split(pieces, Bins(exact.groups, energy, rest, edges, 0.1), 0.0)
        assert got.draft is not None and got.verification is not None
        assert abs(got.draft.energy_j - base.draft.energy_j) <= base.draft.bound_j
        assert abs(got.verification.energy_j - base.verification.energy_j) <= (
            base.verification.bound_j
        )
    assert base.draft.bound_j > 0


def test_the_fitted_interval_covers_the_truth_under_planted_noise_and_is_not_wider_than_needed():
    """Each interval's energy off by independent noise (2 % of it): over 400 windows the nominal
    95 % intervals hold the planted truth 90-99 % of the time, and their mean half-width is
    within 30 % of 1.96 standard deviations of the estimates."""
    import random
    import statistics

    pieces, groups, d_s, v_s = _varied()
    exact = _bins(pieces, groups)
    n = len(groups)
    rng = random.Random(7)
    truths = (P_DRAFT * d_s, P_VERIFY * v_s)
    estimates: list[list[float]] = [[], []]
    halves: list[list[float]] = [[], []]
    inside = 0
    for _ in range(400):
        energy = tuple(e * (1 + rng.gauss(0, 0.02)) for e in exact.energy_j)
        got = split(pieces, Bins(exact.groups, energy, (0.0,) * n, (0.0,) * (n + 1), 0.1), 0.0)
        assert got.draft is not None and got.verification is not None
        for i, est in enumerate((got.draft, got.verification)):
            estimates[i].append(est.energy_j)
            halves[i].append(est.ci95_j)
            inside += abs(est.energy_j - truths[i]) <= est.ci95_j
    assert 0.90 * 800 <= inside <= 0.99 * 800
    for i in range(2):
        spread = 1.96 * statistics.stdev(estimates[i])
        assert statistics.mean(halves[i]) == pytest.approx(spread, rel=0.3)


def test_a_window_with_no_other_time_fits_two_powers():
    """Drafts and verifications back to back over the whole window: the other power is not
    fitted (0), the two are."""
    ks = [1] * 30 + [7] * 30 + [3] * 30 + [8] * 30
    pieces = []
    t = 0.0
    for k in ks:
        pieces += [WorkSpan(t, t + 0.002 + 0.003 * k, DRAFT)]
        t = pieces[-1].end_s
        pieces += [WorkSpan(t, t + 0.016 + 0.001 * k, VERIFICATION)]
        t = pieces[-1].end_s
    got = split(pieces, _bins(pieces, cycles(pieces, 0.25)), 0.0)
    assert got.null_reason is None and got.power_w is not None
    assert got.power_w == pytest.approx((P_DRAFT, P_VERIFY, 0.0), abs=1e-6)


def test_the_null_reasons_say_why_in_full():
    draft, verify = _steps([4] * 100)
    pieces = cut(draft, verify, 0.0, verify[-1][1] + 0.3)
    groups = cycles(pieces, 0.25)
    got = split(pieces, _bins(pieces, groups), 0.0)
    assert got.null_reason == (
        f"not separable: every one of the window's {len(groups)} intervals holds the same mix of "
        "drafting, verifying and other time, so their powers cannot be told apart (drafts and "
        "verifications of the same lengths throughout)"
    )
    assert got.method.startswith(f"least squares over {len(groups)} intervals")
    draft, verify = _steps([1, 8])
    pieces = cut(draft, verify, 0.0, verify[-1][1])
    got = split(pieces, _bins(pieces, cycles(pieces, 0.02)), 0.0)
    assert got.null_reason == (
        "not separable: 3 intervals for 3 powers (drafting, verifying, otherwise); the window is "
        "too short for this sampling rate"
    )
    assert got.method.startswith("least squares over 3 intervals")


@pytest.mark.parametrize("kind", [DRAFT, VERIFICATION])
def test_one_phase_without_the_other_is_null(kind: int):
    pieces = _spans((OTHER, 0.5), (kind, 0.25), (OTHER, 0.5))
    got = split(pieces, per_span([35.0, 60.0, 35.0], [0.0] * 3), 0.0)
    assert got.draft is None and got.verification is None and got.method == ""
    assert got.null_reason == "no draft and verification ran in the window"

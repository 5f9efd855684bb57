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

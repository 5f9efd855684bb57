"""Intervals a timeline resolves (llem.figures.bins): the cases mutation testing found no test
for (scripts/mutation.py): an interval exactly as long as the minimum, no spans at all, energy
moved across the window's own edges, and spans that are each their own interval."""

from __future__ import annotations

import pytest

from llem.figures.bins import Bins, group, interval_s, linear_bound, per_span


def test_an_interval_exactly_as_long_as_the_minimum_stands_alone() -> None:
    """2 r or more resolves an interval's energy: 0.25 + 0.25 s is 0.5 s exactly (binary
    fractions), so it closes a group of its own, and the next 0.5 s another."""
    assert group([0.25, 0.25, 0.5], 0.5) == [(0, 2), (2, 3)]
    assert group([0.5, 0.5], 0.5) == [(0, 1), (1, 2)]


def test_no_spans_make_no_intervals() -> None:
    assert group([], 0.2) == []
    assert group([], 0.0) == []


def test_energy_moved_across_the_window_s_own_edges_moves_its_total() -> None:
    """The window's total (every interval weighted 1) moves only by what crosses its two outer
    edges (2 J in, 5 J out at most) and the intervals' own timing bounds; one interval alone
    also by its inner edge."""
    b = Bins(((0, 1), (1, 2)), (10.0, 20.0), (0.5, 0.25), (2.0, 3.0, 5.0), 0.1)
    assert linear_bound([1.0, 1.0], b) == pytest.approx(2.0 + 5.0 + 0.5 + 0.25)
    assert linear_bound([1.0, 0.0], b) == pytest.approx(2.0 + 3.0 + 0.5)
    assert linear_bound([0.0, 1.0], b) == pytest.approx(3.0 + 5.0 + 0.25)


def test_weights_for_more_intervals_than_the_bins_hold_are_refused() -> None:
    b = Bins(((0, 1), (1, 2)), (10.0, 20.0), (0.5, 0.25), (0.0, 3.0, 0.0), 0.1)
    with pytest.raises(ValueError):
        linear_bound([1.0, 1.0, 1.0], b)


def test_spans_that_are_each_their_own_interval_share_no_edge() -> None:
    """A timeline that resolves every span (resolution 0, a replayed trace): each span's timing
    bound is its own, nothing moves between spans, and grouping at the bins' own minimum keeps
    every span apart."""
    b = per_span([4.0, 6.0, 1.0], [0.5, 0.25, 2.0])
    assert b.groups == ((0, 1), (1, 2), (2, 3))
    assert b.resolution_s == 0.0 and b.min_s == 0.0
    assert group([0.01, 0.02, 0.03], b.min_s) == list(b.groups)
    assert linear_bound([1.0, 0.0, 0.0], b) == pytest.approx(0.5)
    assert linear_bound([1.0, -2.0, 1.0], b) == pytest.approx(0.5 + 2 * 0.25 + 2.0)


def test_intervals_last_four_resolutions_where_the_window_holds_thirty_of_them() -> None:
    """Four resolutions on a 20 s window at 100 ms (50 intervals); as long as leaves 30 of them
    on a 9 s window; never under two resolutions (a 1 s window); nothing to group at r = 0."""
    assert interval_s(0.1, 20.0) == pytest.approx(0.4)
    assert interval_s(0.1, 12.0) == pytest.approx(0.4)
    assert interval_s(0.1, 9.0) == pytest.approx(0.3)
    assert interval_s(0.1, 1.0) == pytest.approx(0.2)
    assert interval_s(0.0, 20.0) == 0.0

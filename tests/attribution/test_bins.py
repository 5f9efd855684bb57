"""Intervals the timeline resolves (llem.figures.bins): grouping, and the bound of a weighted sum
of their energies, where energy moved across an edge leaves one interval and enters the next."""

from __future__ import annotations

import pytest

from llem.figures.bins import Bins, group, linear_bound, sparse_bound


def test_spans_are_grouped_until_each_group_lasts_the_minimum() -> None:
    durations = [0.01, 0.05, 0.2, 0.01, 0.01, 0.3, 0.02]
    got = group(durations, 0.2)
    assert got == [(0, 3), (3, 7)]  # the 20 ms remainder joins the last group
    assert group(durations, 0.0) == [(i, i + 1) for i in range(7)]
    assert group([0.05], 0.2) == [(0, 1)]


def test_energy_moved_between_two_intervals_does_not_move_their_sum() -> None:
    b = Bins(
        ((0, 1), (1, 2), (2, 3)), (10.0, 12.0, 9.0), (1.0, 2.0, 0.5), (0.0, 3.0, 4.0, 0.0), 0.1
    )
    assert linear_bound([1.0, 1.0, 1.0], b) == pytest.approx(3.5)  # the window: only the rests
    assert linear_bound([1.0, 0.0, 0.0], b) == pytest.approx(3.0 + 1.0)  # one edge and its rest
    assert linear_bound([0.5, -1.0, 0.0], b) == pytest.approx(1.5 * 3.0 + 1.0 * 4.0 + 0.5 + 2.0)
    for w in ([1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.5, -1.0, 0.0], [0.0, 0.0, 2.0]):
        sparse = {i: x for i, x in enumerate(w) if x}
        assert sparse_bound(sparse, b) == pytest.approx(linear_bound(w, b))

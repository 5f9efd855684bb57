"""Wilson's interval: textbook values, edges, and its coverage on simulated draws."""

from __future__ import annotations

import random

import pytest

from llem.quality.interval import wilson


def test_textbook_values() -> None:
    # Wilson (1927) score interval, 95%: 0/10 -> (0, 0.2775); 5/10 -> (0.2366, 0.7634)
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    low, high = wilson(10, 10)
    assert high == 1.0 and low == pytest.approx(0.7225, abs=1e-4)


def test_nothing_scored_has_no_interval_and_bad_counts_are_refused() -> None:
    assert wilson(0, 0) is None
    with pytest.raises(ValueError):
        wilson(3, 2)


@pytest.mark.parametrize("p,n", [(0.1, 40), (0.5, 40), (0.85, 100)])
def test_coverage_is_near_95_percent_on_simulated_draws(p: float, n: int) -> None:
    rng = random.Random(7)
    draws = 4000
    covered = 0
    for _ in range(draws):
        k = sum(rng.random() < p for _ in range(n))
        interval = wilson(k, n)
        assert interval is not None
        covered += interval[0] <= p <= interval[1]
    assert 0.92 <= covered / draws <= 0.985, covered / draws

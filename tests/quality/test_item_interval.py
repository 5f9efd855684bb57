"""The quality interval is over distinct items: its coverage of a planted population accuracy
holds at nominal 95% whether a window answers each item once or repeats it 3 or 10 times, greedy
(identical answers) or sampled (answers alike within an item); Wilson's interval over answers,
taken as independent, does not."""

from __future__ import annotations

import pytest

from llem.quality.interval import over_items, wilson
from llem.testing.item_population import Population, coverage
from llem.testing.item_population import interval_over_items as new_interval
from llem.testing.item_population import over_answers as old_interval

RUNS = 1500


@pytest.mark.parametrize("passes", [1, 3, 10])
@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
def test_the_interval_over_items_covers_the_planted_accuracy_at_any_number_of_passes(
    passes: int, sampled: bool
) -> None:
    pop = Population(p=0.6, sampled=sampled)
    assert coverage(new_interval, pop, n_items=16, passes=passes, runs=RUNS, seed=passes) >= 0.93


def test_a_skewed_population_of_sampled_items_is_covered_too() -> None:
    # accuracy 0.9 with items that differ widely (a few hard items carry most of the errors): a
    # run of 16 items that misses the hard ones shows little spread between items; the spread
    # taken at face value covered the truth in 90.9% of 4,000 runs (seed 1), and pooled with two
    # items of the widest spread a proportion allows, in 94.1%
    pop = Population(p=0.9, sampled=True, spread=0.9)
    assert coverage(new_interval, pop, n_items=16, passes=10, runs=RUNS, seed=10) >= 0.93


def test_the_interval_over_answers_fell_short_as_the_passes_grew() -> None:
    pop = Population(p=0.6, sampled=False)
    assert coverage(old_interval, pop, n_items=16, passes=1, runs=RUNS) >= 0.93
    assert coverage(old_interval, pop, n_items=16, passes=3, runs=RUNS) < 0.8
    assert coverage(old_interval, pop, n_items=16, passes=10, runs=RUNS) < 0.5


def test_greedy_repeats_change_nothing_and_count_items_once() -> None:
    once = over_items([(1, 1)] * 10 + [(0, 1)] * 6)
    ten = over_items([(10, 10)] * 10 + [(0, 10)] * 6)
    assert once is not None and ten is not None
    assert (ten.value, ten.n_items, ten.n_answers) == (10 / 16, 16, 160)
    assert (ten.low, ten.high) == pytest.approx((once.low, once.high))
    # as wide as Wilson's over the 16 items (t quantile: wider), never as Wilson's over 160
    low16, high16 = wilson(10, 16)  # type: ignore[misc]
    assert ten.low <= low16 and ten.high >= high16
    low160, high160 = wilson(100, 160)  # type: ignore[misc]
    assert ten.high - ten.low > 2 * (high160 - low160)


def test_each_item_counts_once_whatever_its_number_of_answers() -> None:
    # a window stopped mid-pass: items 0-1 answered 3 times (right), items 2-3 twice (wrong)
    got = over_items([(3, 3), (3, 3), (0, 2), (0, 2)])
    assert got is not None and got.value == 0.5  # not 6/10


def test_all_right_and_all_wrong_have_their_exact_ends() -> None:
    right = over_items([(3, 3)] * 8)
    wrong = over_items([(0, 3)] * 8)
    assert right is not None and right.high == 1.0 and right.low < 1.0
    assert wrong is not None and wrong.low == 0.0 and wrong.high > 0.0
    assert over_items([]) is None
    with pytest.raises(ValueError):
        over_items([(4, 3)])


def test_few_items_get_the_small_sample_allowance() -> None:
    # 3 items: the spread between them is estimated from 2 degrees of freedom, so the interval is
    # wider than Wilson's at the same effective size with the normal quantile
    got = over_items([(1, 1), (1, 1), (0, 1)])
    assert got is not None and got.effective_n == pytest.approx(2.0)
    from llem.quality.interval import wilson_at

    low, high = wilson_at(2 / 3, 2.0)
    assert got.low < low - 0.05 and got.high >= high

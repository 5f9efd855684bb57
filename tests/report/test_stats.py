from __future__ import annotations

import pytest

from llem.report.stats import summarise, t_cdf, t_quantile

# scipy.stats.t.ppf reference values
T_975 = {
    1: 12.706205,
    2: 4.302653,
    3: 3.182446,
    4: 2.776445,
    5: 2.570582,
    9: 2.262157,
    10: 2.228139,
    29: 2.045230,
    30: 2.042272,
    100: 1.983972,
    1000: 1.962339,
}


@pytest.mark.parametrize("df,expected", sorted(T_975.items()))
def test_t_quantile_matches_reference_to_six_digits(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=5e-7)


def test_t_quantile_other_levels_and_symmetry() -> None:
    assert t_quantile(0.995, 1) == pytest.approx(63.656741, abs=5e-6)
    assert t_quantile(0.95, 7) == pytest.approx(1.894579, abs=5e-7)
    assert t_quantile(0.025, 2) == pytest.approx(-4.302653, abs=5e-7)
    assert t_quantile(0.5, 3) == 0.0
    assert t_cdf(t_quantile(0.9, 4), 4) == pytest.approx(0.9, abs=1e-12)


def test_t_quantile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_cdf(1.0, 0)


def test_ci_for_hand_computed_case() -> None:
    s = summarise([10, 12, 14])
    assert s.n == 3
    assert s.mean == 12.0
    assert s.std == pytest.approx(2.0)
    # t(0.975, 2) * 2 / sqrt(3) = 4.302653 * 1.154701
    assert s.ci_half == pytest.approx(4.9683, abs=5e-5)
    assert s.ci_low == pytest.approx(12 - 4.9683, abs=5e-5)
    assert s.ci_high == pytest.approx(12 + 4.9683, abs=5e-5)


def test_one_value_has_no_spread_and_gaps_are_not_zero() -> None:
    one = summarise([7.5])
    assert (one.n, one.mean, one.std, one.ci_half) == (1, 7.5, None, None)
    assert one.ci_low is None and one.ci_high is None
    none = summarise([None, float("nan")])
    assert (none.n, none.mean) == (0, None)
    # missing values are skipped, not averaged in as 0
    assert summarise([None, 4.0, 6.0]).mean == 5.0
    assert summarise([True, 3.0]).n == 1  # a flag is not a measurement
    same = summarise([1.0, 1.0])  # two equal values: a real spread of 0, not a gap
    assert (same.std, same.ci_half) == (0.0, 0.0)

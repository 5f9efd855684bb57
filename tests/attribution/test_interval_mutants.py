"""The 95 % interval's parts (llem.figures.interval) on numbers worked out by hand: the cases
mutation testing found no test for (scripts/mutation.py). Bartlett weights over 3 lags are
0.75, 0.5 and 0.25; each expected figure below is summed by hand from them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llem.figures.bins import Bins
from llem.figures.energy_fit import Coefficient, Fit, StepRow
from llem.figures.interval import (
    LAGS,
    Z95,
    coefficient_covariance,
    figure_intervals,
    gradients,
    half_width,
    newey_west,
    residual_variance,
)
from llem.figures.share_weights import Sharing
from llem.figures.step_shares import StepSpan
from llem.vocabulary.workload import EngineStep, StepShare


def test_the_constants_are_the_documented_ones() -> None:
    assert LAGS == 3
    assert pytest.approx(1.959964, abs=1e-6) == Z95


def test_newey_west_of_one_series_sums_its_neighbours_products_by_bartlett_weights() -> None:
    """u = 1, 2, 3: 14 + 2 x 0.75 x (2 + 6) + 2 x 0.5 x 3 = 29 (lag 3 has no pair)."""
    assert newey_west([[1.0], [2.0], [3.0]]) == pytest.approx(np.array([[29.0]]))
    assert newey_west([[1.0], [2.0], [3.0]], lags=1) == pytest.approx(
        np.array([[14.0 + 2 * 0.5 * 8]])
    )
    assert newey_west([[1.0], [2.0], [3.0]], lags=0) == pytest.approx(np.array([[14.0]]))
    assert newey_west([[5.0]]) == pytest.approx(np.array([[25.0]]))


def test_newey_west_of_two_series_is_symmetric() -> None:
    """u = (1, 0), (0, 1), lag 1 at weight 0.5: the cross term u_1 u_0' = [[0, 0], [1, 0]]
    and its transpose."""
    got = newey_west([[1.0, 0.0], [0.0, 1.0]], lags=1)
    assert got == pytest.approx(np.array([[1.0, 0.5], [0.5, 1.0]]))
    got = newey_west([[1.0, 2.0], [3.0, 4.0], [0.0, 1.0]], lags=1)
    # u'u = [[10, 14], [14, 21]]; u_1 u_0' + u_2 u_1' = [[3, 6], [4, 8]] + [[0, 0], [3, 4]]
    # = [[3, 6], [7, 12]], plus its transpose, at 0.5: [[3, 6.5], [6.5, 12]]
    assert got == pytest.approx(np.array([[13.0, 20.5], [20.5, 33.0]]))


def test_the_covariance_of_a_mean_is_its_sandwich_over_the_residuals() -> None:
    """One column of ones over 4 intervals, residuals 1, -1, 1, -1: (X'X)^-1 = 1/4; with no
    lag the meat is 4, so 1/4 x 4 x 1/4 x 4/3 = 1/3; over 3 lags it is 4 - 4.5 + 2 - 0.5 = 1,
    so 1/12."""
    x = [[1.0]] * 4
    r = [1.0, -1.0, 1.0, -1.0]
    assert coefficient_covariance(x, r, lags=0) == pytest.approx(np.array([[1 / 3]]))
    assert coefficient_covariance(x, r) == pytest.approx(np.array([[1 / 12]]))
    # as many intervals as coefficients: n / max(n - p, 1) = 1, so 1/4 x 6^2 x 1/4
    assert coefficient_covariance([[2.0]], [3.0]) == pytest.approx(np.array([[36 / 16]]))


def test_a_figures_residual_variance_takes_its_intervals_and_their_neighbours() -> None:
    """Weights 2 on interval 1 and 1 on interval 3, residuals 9, 1, 5, -1: u = 2, 0, -1
    (interval 2 between them with weight 0; interval 0 outside): 4 + 1 + 2 x 0.5 x (-2) = 3."""
    assert residual_variance({1: 2.0, 3: 1.0}, [9.0, 1.0, 5.0, -1.0]) == pytest.approx(3.0)
    assert residual_variance({}, [1.0, 2.0]) == 0.0
    assert residual_variance({0: 1.0}, [3.0]) == pytest.approx(9.0)
    # u = 1, 1, 1, 1, 1: 5 + 2 (0.75 x 4 + 0.5 x 3 + 0.25 x 2) = 15 (lag 4 not counted)
    w = dict.fromkeys(range(5), 1.0)
    assert residual_variance(w, [1.0] * 5) == pytest.approx(15.0)


def test_gradients_are_central_differences_of_the_given_steps() -> None:
    def value_at(f):
        out = {"x": 3 * f[0] + f[1] ** 2, "y": f[0]}
        if f[1] > 2:
            out["z"] = 4.0  # a figure present on one side only
        if f[1] < 2:
            out["w"] = 4.0  # and one on the other side only
        return out

    got = gradients(value_at, [1.0, 2.0], [0.1, 0.5])
    assert got["x"] == pytest.approx([3.0, 4.0])
    assert got["y"] == pytest.approx([1.0, 0.0])
    assert got["z"] == pytest.approx([0.0, 4.0])
    assert got["w"] == pytest.approx([0.0, -4.0])
    assert gradients(value_at, [1.0, 2.0], [0.0, 0.5])["x"] == pytest.approx([0.0, 4.0])


def test_the_half_width_adds_the_three_variances() -> None:
    """g'Vg = 1 + 16 = 17, residual 3, (0.3 x 10)^2 / 3 = 3: Z95 x sqrt(23)."""
    cov = [[1.0, 0.0], [0.0, 4.0]]
    assert half_width([1.0, 2.0], cov, 3.0, 10.0, 0.3) == pytest.approx(Z95 * math.sqrt(23))
    assert half_width(None, cov, 3.0, 10.0, 0.3) == pytest.approx(Z95 * math.sqrt(6))
    assert half_width([], cov, 3.0, -10.0, 0.3) == pytest.approx(Z95 * math.sqrt(6))
    assert half_width([1.0, 0.0], [[-5.0, 0], [0, 0]], 1.0, 0.0, 0.0) == 0.0


def _window() -> tuple[list[StepSpan], Bins, list[StepRow]]:
    """Four prefill steps of 100, 200, 300 and 400 tokens at 1 ms each, each its own interval,
    their energies 0.004 J a token exactly but for 0.1 J more in the first and less in the
    last."""
    cut, rows, energy = [], [], []
    for i, p in enumerate((100, 200, 300, 400)):
        s = EngineStep(i + 0.001, 1, p, 0, float(i), (StepShare(i, p, 0),))
        cut.append(StepSpan(float(i), i + 0.001, s, (0,)))
        rows.append(StepRow(p, 0, 0.001))
        energy.append(0.004 * p + (0.1 if i == 0 else -0.1 if i == 3 else 0.0))
    b = Bins(tuple((i, i + 1) for i in range(4)), tuple(energy), (0.0,) * 4, (0.0,) * 5, 0.001)
    return cut, b, rows


def test_no_fitted_coefficient_gives_no_interval() -> None:
    cut, b, rows = _window()
    null = Coefficient(None, null_reason="x")
    fit = Fit(null, null, null, None, 4)
    got = figure_intervals(Sharing(cut, b), fit, rows, lambda f: (0, 0, 0, 0, 0), {}, 0.0)
    assert got == ({}, {})


def test_a_cost_and_a_phase_have_the_hand_worked_half_widths() -> None:
    """a = 0.004 J a token as fitted: the residuals are the planted 0.1, 0, 0, -0.1 J. The
    coefficient: X'X = 300000, the products x_i r_i are 10, 0, 0, -40, so S = 100 + 1600 +
    2 x 0.25 x (-400) = 1500 and its variance 1500 / 300000^2 x 4 / 3. The prefill phase (every
    interval at weight 1, whatever a is, and by time alone too) moves only with the residuals:
    0.01 + 0.01 + 2 x 0.25 x (-0.01) = 0.015 J^2."""
    cut, b, rows = _window()
    fit = Fit(Coefficient(0.004), Coefficient(None), Coefficient(None), None, 4)
    weights = {("prefill", 0): dict.fromkeys(range(4), 1.0)}
    figs, coef = figure_intervals(
        Sharing(cut, b), fit, rows, lambda f: (f.get("a", 0.0), 0, 0, 0, 0), weights, 0.0
    )
    assert coef == {"a": pytest.approx(Z95 * math.sqrt(1500 / 300000**2 * 4 / 3))}
    assert figs[("prefill", 0)] == pytest.approx(Z95 * math.sqrt(0.015), rel=1e-9)
    # the window's relative bound: (0.1 x 4 J)^2 / 3 more
    figs, _ = figure_intervals(
        Sharing(cut, b), fit, rows, lambda f: (f.get("a", 0.0), 0, 0, 0, 0), weights, 0.1
    )
    assert figs[("prefill", 0)] == pytest.approx(Z95 * math.sqrt(0.015 + 0.16 / 3), rel=1e-9)


def test_residuals_of_exactly_zero_give_intervals_of_zero() -> None:
    """Energies 0.25 J a token exactly (binary fractions): every residual is 0, so the
    coefficient's standard error is 0 (its difference step falls back to a thousandth of it)
    and each half-width is 0."""
    cut, b, rows = _window()
    b = Bins(b.groups, (25.0, 50.0, 75.0, 100.0), b.rest_bound_j, b.edge_bound_j, 0.001)
    fit = Fit(Coefficient(0.25), Coefficient(None), Coefficient(None), None, 4)
    weights = {("prefill", 0): dict.fromkeys(range(4), 1.0)}
    figs, coef = figure_intervals(
        Sharing(cut, b), fit, rows, lambda f: (f.get("a", 0.0), 0, 0, 0, 0), weights, 0.0
    )
    assert coef == {"a": 0.0}
    assert figs == {("prefill", 0): 0.0}

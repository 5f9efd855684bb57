"""The step model's fit (llem.figures.energy_fit) on designs whose answer is worked out by hand:
the cases mutation testing found no test for (scripts/mutation.py). The main design has
orthogonal columns, each cost read from its own pair of intervals whose planted energies are the
cost plus and minus a planted error ``e``: the least-squares value is the planted cost, each
residual is ``e`` in size, ``s^2 = 6 e^2 / (6 - 3)`` and a coefficient's variance is ``s^2`` over
its column's sum of squares (the design is orthogonal)."""

from __future__ import annotations

import pytest

from llem.figures.energy_fit import Fit, StepRow, fit_steps

A, B, P = 0.004, 0.05, 120.0  # planted J/prefill token, J/decode token, W
ROWS = [  # each cost alone in two intervals: 100 prefill tokens, 10 decode tokens, 10 ms
    StepRow(100, 0, 0.0),
    StepRow(100, 0, 0.0),
    StepRow(0, 10, 0.0),
    StepRow(0, 10, 0.0),
    StepRow(0, 0, 0.01),
    StepRow(0, 0, 0.01),
]
TRUE = [0.4, 0.4, 0.5, 0.5, 1.2, 1.2]  # J: 100 A, 10 B, 0.01 P


def _identified(fit: Fit) -> bool:
    """The three costs of every split are published."""
    return all(c.value is not None for c in (fit.a, fit.b, fit.p_static))


def _splittable(fit: Fit) -> bool:
    """The three costs of every split are fitted (published or not)."""
    return all(c.usable is not None for c in (fit.a, fit.b, fit.p_static))


def _energies(e: float) -> list[float]:
    return [t + (e if i % 2 == 0 else -e) for i, t in enumerate(TRUE)]


def test_each_cost_its_standard_error_and_r2_are_the_hand_worked_ones() -> None:
    """e = 0.16 J: s^2 = 2 e^2, so se(a) = e / 100, se(b) = e / 10, se(P) = e / 0.01; each
    cost is more than 2 of them from 0, so each is published. R^2 = 1 - 6 e^2 / TSS."""
    e = 0.16
    y = _energies(e)
    fit = fit_steps(ROWS, y, [0.0] * 6)
    assert fit.n_steps == 6 and _identified(fit)
    for c, value, se in [(fit.a, A, e / 100), (fit.b, B, e / 10), (fit.p_static, P, e / 0.01)]:
        assert c.value == pytest.approx(value, rel=1e-9)
        assert c.se == pytest.approx(se, rel=1e-9)
        assert c.null_reason is None and c.se_null_reason is None
        assert c.fitted is None
    mean = sum(y) / 6
    tss = sum((v - mean) ** 2 for v in y)
    assert fit.r2 == pytest.approx(1.0 - 6 * e * e / tss, rel=1e-9)
    assert fit.r2_null_reason is None
    assert fit.p_between.value is None and fit.p_between.null_reason == (
        "not fitted: no interval holds time between steps"
    )
    assert fit.k.value is None and fit.k.null_reason == (
        "not fitted: no step says which requests ran, so no context is known"
    )


def test_a_cost_within_two_standard_errors_of_zero_is_null_with_its_fitted_value() -> None:
    """e = 0.3 J: se(a) = 0.003 (a is 1.33 of them), se(b) = 0.03 (b: 1.67), se(P) = 30 W
    (P: 4): a and b are null with the reason, their fitted values kept for a split."""
    fit = fit_steps(ROWS, _energies(0.3), [0.0] * 6)
    assert fit.p_static.value == pytest.approx(P)
    for c, value, se, what in [(fit.a, A, 0.003, "prefill"), (fit.b, B, 0.03, "decode")]:
        assert c.value is None and c.fitted == pytest.approx(value, rel=1e-9)
        assert c.usable == pytest.approx(value, rel=1e-9)
        assert c.null_reason == (
            f"not resolved: the fitted value {value:.3g} ± {se:.2g} (1 s.e.) is within 2 "
            f"standard errors of 0; {what} tokens vary too little across the window's steps "
            "beside the other terms"
        )
    assert not _identified(fit) and _splittable(fit)


def test_a_cost_between_two_and_three_standard_errors_is_published() -> None:
    """e = 0.18 J: a is 2.2 standard errors from 0 (published); e = 0.22 J: 1.8 (null)."""
    fit = fit_steps(ROWS, _energies(0.18), [0.0] * 6)
    assert fit.a.value == pytest.approx(A) and fit.a.se == pytest.approx(0.0018)
    fit = fit_steps(ROWS, _energies(0.22), [0.0] * 6)  # a: 1.8 standard errors
    assert fit.a.value is None


def test_a_negative_fitted_cost_is_null_with_the_reason() -> None:
    """The decode interval's energy planted below 0: b fits to -0.01 J per token (one interval
    a cost: no standard error to give)."""
    fit = fit_steps([ROWS[0], ROWS[2], ROWS[4]], [0.4, -0.1, 1.2], [0.0] * 3)
    assert fit.b.value is None and fit.b.fitted == pytest.approx(-0.01)
    assert fit.b.null_reason == "not resolved: the fitted value -0.01 is not above 0"
    assert fit.b.se is None


def test_as_many_intervals_as_costs_leave_the_standard_errors_null_with_the_reason() -> None:
    rows = [ROWS[0], ROWS[2], ROWS[4]]
    fit = fit_steps(rows, [0.4, 0.5, 1.2], [0.0] * 3)
    assert fit.a.value == pytest.approx(A) and fit.a.se is None
    assert fit.a.se_null_reason == (
        "no residual degrees of freedom: as many steps as identified coefficients"
    )
    assert fit.p_static.value == pytest.approx(P) and fit.p_static.se is None


def test_the_bound_is_the_timing_bound_carried_by_the_solution_plus_the_relative_error() -> None:
    """a = (E1 + E2) / 200: timing bounds of 1 J and 3 J on its two intervals move it by 0.02;
    b = (E3 + E4) / 20, P = (E5 + E6) / 0.02."""
    tau = [1.0, 3.0, 0.5, 0.5, 0.01, 0.03]
    fit = fit_steps(ROWS, TRUE, tau, scale_relative=0.1)
    assert fit.a.timing_bound == pytest.approx(0.02)
    assert fit.a.bound == pytest.approx(0.02 + 0.1 * A)
    assert fit.b.timing_bound == pytest.approx(0.05)
    assert fit.b.bound == pytest.approx(0.05 + 0.1 * B)
    assert fit.p_static.timing_bound == pytest.approx(2.0)
    assert fit.p_static.bound == pytest.approx(2.0 + 0.1 * P)


def test_a_bound_given_for_tied_errors_is_the_one_used() -> None:
    seen = []

    def bound_of(w) -> float:
        seen.append(list(w))
        return 7.0

    fit = fit_steps(ROWS, TRUE, [1.0] * 6, bound_of=bound_of)
    assert fit.a.timing_bound == 7.0 and fit.a.bound == pytest.approx(7.0)
    assert seen[0] == pytest.approx([1 / 200, 1 / 200, 0, 0, 0, 0], abs=1e-12)


def test_no_interval_leaves_every_coefficient_and_r2_null_with_the_reason() -> None:
    fit = fit_steps([], [], [])
    assert fit.n_steps == 0 and fit.r2 is None
    assert fit.r2_null_reason == "no engine step in the window"
    for c in (fit.a, fit.b, fit.p_static):
        assert c.value is None and c.null_reason == "no engine step in the window"


def test_equal_energies_leave_r2_null_with_the_reason() -> None:
    rows = [StepRow(100, 10, 0.01 + 0.001 * i) for i in range(4)]
    fit = fit_steps(rows, [1.0] * 4, [0.0] * 4)
    assert fit.r2 is None
    assert fit.r2_null_reason == "every step has the same energy: R^2 is undefined"


def test_an_exact_fit_has_r2_one() -> None:
    rows = [*ROWS, StepRow(50, 5, 0.02)]
    fit = fit_steps(rows, [*TRUE, 50 * A + 5 * B + 0.02 * P], [0.0] * 7)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.a.se == pytest.approx(0.0, abs=1e-9)


def _context_rows(sign: float) -> tuple[list[StepRow], list[float]]:
    """Pairs of intervals alike but for the context they read (100 and 300 tokens). ``sign``
    1: the energies are the planted costs with 0.002 J per context token. ``sign`` -1: the
    planted costs without context, 0.2 J more in the pair's first and 0.2 J less in its second
    interval: the error cancels against every column a pair shares, so without the context term
    a, b and P fit to the planted ones, and with it the context cost fits below 0 (the error
    falls as the context grows)."""
    rows, y = [], []
    for p, q, d in [(100, 0, 0.0), (0, 10, 0.0), (0, 0, 0.01), (100, 10, 0.01)]:
        base = A * p + B * q + P * d
        rows += [StepRow(p, q, d, 0.0, 100), StepRow(p, q, d, 0.0, 300)]
        if sign > 0:
            y += [base + 0.002 * 100, base + 0.002 * 300]
        else:
            y += [base + 0.2, base - 0.2]
    return rows, y


def test_a_context_cost_not_above_zero_is_dropped_and_the_others_fitted_without_it() -> None:
    rows, y = _context_rows(-1.0)
    fit = fit_steps(rows, y, [0.0] * len(rows))
    assert fit.k.value is None and fit.k.fitted is None
    reason = fit.k.null_reason or ""
    assert reason.startswith("not used: the fitted cost -")
    assert reason.endswith(" is not above 0, so the model is fitted without it")
    assert fit.a.value == pytest.approx(A) and fit.b.value == pytest.approx(B)
    assert fit.p_static.value == pytest.approx(P)


def test_a_context_cost_above_zero_is_fitted_beside_the_others() -> None:
    rows, y = _context_rows(1.0)
    fit = fit_steps(rows, y, [0.0] * len(rows))
    assert fit.k.value == pytest.approx(0.002)
    assert fit.a.value == pytest.approx(A) and fit.b.value == pytest.approx(B)
    assert fit.p_static.value == pytest.approx(P)
    assert fit.r2 == pytest.approx(1.0)


def test_a_context_collinear_with_the_decode_tokens_alone_is_dropped_with_the_reason() -> None:
    rows = [
        StepRow(100 * (i % 2), 10 + i, 0.01 * (1 + i % 3), 0.0, 30 * (10 + i)) for i in range(8)
    ]
    y = [A * r.prefill_tokens + B * r.decode_tokens + P * r.duration_s for r in rows]
    fit = fit_steps(rows, y, [0.0] * 8)
    assert fit.k.value is None
    assert fit.k.null_reason == (
        "not identified: context tokens read are collinear with prefill tokens and decode "
        "tokens and step duration over the window's 8 intervals (every interval has the same "
        "shape)"
    )
    assert fit.b.value == pytest.approx(B)


def test_every_interval_the_same_shape_names_what_each_cost_is_collinear_with() -> None:
    rows = [StepRow(100, 10, 0.01)] * 3 + [StepRow(200, 20, 0.02)] * 3
    fit = fit_steps(rows, [1.0, 1.1, 0.9, 2.0, 2.1, 1.9], [0.0] * 6)
    assert fit.a.null_reason == (
        "not identified: prefill tokens are collinear with decode tokens and step duration "
        "over the window's 6 intervals (every interval has the same shape)"
    )
    assert fit.p_static.null_reason is not None
    assert "step duration are collinear with prefill tokens and decode tokens" in (
        fit.p_static.null_reason
    )


def test_a_single_cost_alone_is_fitted() -> None:
    """Only decode tokens: b alone, its column never deleted to test collinearity against
    nothing."""
    rows = [StepRow(0, q, 0.0) for q in (10, 20, 30)]
    fit = fit_steps(rows, [0.5, 1.0, 1.5], [0.0] * 3)
    assert fit.b.value == pytest.approx(B)
    assert fit.a.null_reason == "not identified: no step in the window has prefill tokens"
    assert fit.p_static.null_reason == "not identified: no step in the window has step duration"


def test_one_interval_fits_its_one_cost_with_no_standard_error() -> None:
    fit = fit_steps([StepRow(0, 10, 0.0)], [0.5], [0.0])
    assert fit.n_steps == 1
    assert fit.b.value == pytest.approx(B) and fit.b.null_reason is None
    assert fit.b.se is None and fit.b.se_null_reason is not None
    assert fit.r2 is None


def test_one_residual_degree_of_freedom_gives_standard_errors() -> None:
    """The three costs' intervals and one more of each kind at once (E exact): s^2 = 0."""
    rows = [ROWS[0], ROWS[2], ROWS[4], StepRow(100, 10, 0.01)]
    fit = fit_steps(rows, [0.4, 0.5, 1.2, 2.1], [0.0] * 4)
    assert fit.a.se == pytest.approx(0.0, abs=1e-12) and fit.a.se_null_reason is None


def test_a_cost_fitted_as_exactly_zero_is_null() -> None:
    fit = fit_steps([ROWS[0], ROWS[2], ROWS[4]], [0.0, 0.5, 1.2], [0.0] * 3)
    assert fit.a.value is None and fit.a.fitted == 0.0
    assert fit.a.null_reason == "not resolved: the fitted value 0 is not above 0"


def test_two_intervals_have_an_r2() -> None:
    """b alone over 10 and 20 decode tokens, energies 0.5 and 1.1 J: b = (5 + 22) / 500 =
    0.054, the residuals -0.04 and 0.02 J, TSS = 2 x 0.3^2."""
    fit = fit_steps([StepRow(0, 10, 0.0), StepRow(0, 20, 0.0)], [0.5, 1.1], [0.0] * 2)
    assert fit.b.value == pytest.approx(0.054)
    assert fit.r2 == pytest.approx(1 - (0.04**2 + 0.02**2) / 0.18)


def test_time_between_steps_collinear_with_step_time_is_not_identified() -> None:
    """Every interval's seconds between steps half its seconds in steps."""
    rows = [
        StepRow(100 * (i % 2), 10 + i, 0.01 * (1 + i % 3), 0.005 * (1 + i % 3)) for i in range(8)
    ]
    y = [A * r.prefill_tokens + B * r.decode_tokens + P * r.duration_s for r in rows]
    fit = fit_steps(rows, y, [0.0] * 8)
    assert fit.p_between.value is None
    assert fit.p_between.null_reason == (
        "not identified: time between steps are collinear with prefill tokens and decode "
        "tokens and step duration over the window's 8 intervals (every interval has the same "
        "shape)"
    )


def test_identification_does_not_depend_on_the_units() -> None:
    """The same design with its seconds in units of 1e-11 s (a column 1e13 times smaller than
    the tokens'): each column is judged at unit norm, so the step time is still identified."""
    rows = [StepRow(1000 * (i % 2), 100 + 10 * i, 1e-11 * (1 + i % 3)) for i in range(8)]
    y = [A * r.prefill_tokens + B * r.decode_tokens + 1e9 * r.duration_s for r in rows]
    fit = fit_steps(rows, y, [0.0] * 8)
    assert fit.p_static.null_reason is None
    assert fit.p_static.value == pytest.approx(1e9, rel=1e-6)

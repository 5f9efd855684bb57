"""Quality figures (llem.quality.figures) where mutation testing found no test
(scripts/mutation.py): every null figure has its reason, and only null figures have one; the
energy figures of a window that measured 0 J or no bound; the metric and the interval's method
carried through."""

from __future__ import annotations

import pytest

from llem.quality.figures import quality_figures
from llem.quality.scorers import Score

RIGHT, WRONG = Score(True, "1"), Score(False, "2")


def test_the_figures_name_their_metric_and_interval_method() -> None:
    q = quality_figures("accuracy", [RIGHT, WRONG], 100.0, 1.0)
    assert q.metric == "accuracy"
    assert q.interval_method.startswith("Wilson score interval over items, 95%")
    assert q.null_reasons == {}


def test_nothing_scored_says_so_and_nothing_else_is_null() -> None:
    q = quality_figures("exact_match", [], 500.0, 5.0)
    assert q.value is None
    assert q.null_reasons == {
        "value": "no request was scored",
        "j_per_correct_answer": "no answer was correct",
    }


def test_no_energy_gives_both_energy_figures_the_default_reason() -> None:
    q = quality_figures("exact_match", [RIGHT], None, None)
    assert q.j_per_correct_answer is None and q.correct_per_kj is None
    assert q.j_per_correct_answer_bound is None
    assert q.null_reasons == {
        "j_per_correct_answer": "no energy was measured",
        "correct_per_kj": "no energy was measured",
    }


def test_a_window_that_measured_no_energy_has_no_answers_per_kj() -> None:
    """0 J measured (a trace of 0 W): J per correct answer is 0 J; correct answers per kJ would
    divide by 0, so it is null with the reason."""
    q = quality_figures("exact_match", [RIGHT, RIGHT], 0.0, 0.0)
    assert q.j_per_correct_answer == 0.0 and q.j_per_correct_answer_bound == 0.0
    assert q.correct_per_kj is None
    assert q.null_reasons == {"correct_per_kj": "the measured energy is not positive"}


def test_half_a_joule_is_two_thousand_correct_answers_per_kj_per_answer() -> None:
    q = quality_figures("exact_match", [RIGHT, WRONG, RIGHT], 0.5, 0.1)
    assert q.j_per_correct_answer == pytest.approx(0.25)
    assert q.correct_per_kj == pytest.approx(4000.0)  # 2 answers in 0.0005 kJ
    assert q.j_per_correct_answer_bound == pytest.approx(0.05)


def test_energy_without_a_bound_leaves_only_the_bound_null() -> None:
    q = quality_figures("exact_match", [RIGHT, WRONG], 300.0, None)
    assert q.j_per_correct_answer == pytest.approx(300.0)
    assert q.correct_per_kj == pytest.approx(1 / 0.3)
    assert q.j_per_correct_answer_bound is None
    assert q.null_reasons == {"j_per_correct_answer_bound": "the energy has no bound"}

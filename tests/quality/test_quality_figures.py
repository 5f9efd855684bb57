"""Quality figures from planted scores and planted energy."""

from __future__ import annotations

import pytest

from llem.quality.figures import quality_figures
from llem.quality.scorers import Score

RIGHT, WRONG = Score(True, "1"), Score(False, "2")


def test_energy_per_correct_answer_and_its_bound() -> None:
    q = quality_figures("exact_match", [RIGHT, RIGHT, WRONG, RIGHT], 1200.0, 30.0)
    assert (q.n_answers, q.n_correct, q.value) == (4, 3, 0.75)
    assert q.j_per_correct_answer == pytest.approx(400.0)
    assert q.j_per_correct_answer_bound == pytest.approx(10.0)
    assert q.correct_per_kj == pytest.approx(2.5)
    assert q.ci95 is not None and q.ci95[0] < 0.75 < q.ci95[1]
    assert not q.null_reasons


def test_no_energy_leaves_the_energy_figures_null_with_the_reason() -> None:
    q = quality_figures("exact_match", [RIGHT, WRONG], None, None, "no NVIDIA GPU/NVML")
    assert q.value == 0.5 and q.j_per_correct_answer is None and q.correct_per_kj is None
    assert q.null_reasons["j_per_correct_answer"] == "no NVIDIA GPU/NVML"


def test_no_correct_answer_has_no_energy_per_correct_answer() -> None:
    q = quality_figures("exact_match", [WRONG, WRONG], 500.0, 5.0)
    assert q.value == 0.0 and q.j_per_correct_answer is None and q.correct_per_kj == 0.0
    assert q.null_reasons["j_per_correct_answer"] == "no answer was correct"


def test_nothing_scored_has_no_value() -> None:
    q = quality_figures("exact_match", [], 500.0, 5.0)
    assert q.value is None and q.ci95 is None and "value" in q.null_reasons

"""A run's quality figures: the proportion correct with its interval, and energy per correct answer.

Energy per correct answer is the run's measured energy over its correct answers. The count of
correct answers is exact, so the energy's worst-case bound divides the same way; correct answers
per kJ is the reciprocal, in kJ. A figure that cannot be given is None, with the reason in
``null_reasons`` under its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llem.quality.interval import METHOD, wilson
from llem.quality.scorers import Score


@dataclass(frozen=True)
class QualityFigures:
    metric: str  # the scorer's or the task's metric name, e.g. "exact_match"
    n_scored: int
    n_correct: int
    value: float | None  # the proportion correct
    ci95: tuple[float, float] | None
    interval_method: str
    j_per_correct_answer: float | None
    j_per_correct_answer_bound: float | None
    correct_per_kj: float | None
    null_reasons: dict[str, str] = field(default_factory=dict)


def quality_figures(
    metric: str,
    scores: Sequence[Score],
    energy_j: float | None,
    energy_bound_j: float | None,
    energy_reason: str = "no energy was measured",
) -> QualityFigures:
    """The figures of ``scores`` (one per scored request) over a window that used ``energy_j``
    (None: not measured, for ``energy_reason``) with its worst-case bound ``energy_bound_j``."""
    n = len(scores)
    correct = sum(1 for s in scores if s.correct)
    reasons: dict[str, str] = {}
    if n == 0:
        reasons["value"] = "no request was scored"
    per_answer = per_kj = bound = None
    if energy_j is None:
        reasons["j_per_correct_answer"] = reasons["correct_per_kj"] = energy_reason
    elif correct == 0:
        reasons["j_per_correct_answer"] = "no answer was correct"
        per_kj = 0.0
    else:
        per_answer = energy_j / correct
        per_kj = correct / (energy_j / 1000.0) if energy_j > 0 else None
        if per_kj is None:
            reasons["correct_per_kj"] = "the measured energy is not positive"
        bound = energy_bound_j / correct if energy_bound_j is not None else None
    if per_answer is not None and bound is None:
        reasons["j_per_correct_answer_bound"] = "the energy has no bound"
    return QualityFigures(
        metric=metric,
        n_scored=n,
        n_correct=correct,
        value=correct / n if n else None,
        ci95=wilson(correct, n),
        interval_method=METHOD,
        j_per_correct_answer=per_answer,
        j_per_correct_answer_bound=bound,
        correct_per_kj=per_kj,
        null_reasons=reasons,
    )

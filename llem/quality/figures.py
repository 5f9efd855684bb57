"""A run's quality figures: the proportion correct with its interval, and energy per correct answer.

The proportion and its interval are over distinct items (``llem.quality.interval.over_items``):
each answer names its item (the prompt it answered), and a window that answered each item several
times counts each item once, weighted by its proportion correct.

Energy per correct answer is the run's measured energy over its correct answers. The count of
correct answers is exact, so the energy's worst-case bound divides the same way; correct answers
per kJ is the reciprocal, in kJ. A figure that cannot be given is None, with the reason in
``null_reasons`` under its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llem.quality.interval import ITEMS_METHOD, over_items
from llem.quality.scorers import Score


@dataclass(frozen=True)
class QualityFigures:
    metric: str  # the scorer's or the task's metric name, e.g. "exact_match"
    n_answers: int
    n_items: int  # distinct items answered
    n_correct: int
    value: float | None  # the mean over items of each item's proportion correct
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
    items: Sequence[int] | None = None,
) -> QualityFigures:
    """The figures of ``scores`` (one per scored request) over a window that used ``energy_j``
    (None: not measured, for ``energy_reason``) with its worst-case bound ``energy_bound_j``;
    ``items[i]`` is the item (prompt index) ``scores[i]`` answered (None: each answer its own)."""
    n = len(scores)
    keys = list(items) if items is not None else list(range(n))
    if len(keys) != n:
        raise ValueError(f"{n} scores but {len(keys)} items")
    per_item: dict[int, list[int]] = {}
    for key, s in zip(keys, scores, strict=True):
        tally = per_item.setdefault(key, [0, 0])
        tally[0] += 1 if s.correct else 0
        tally[1] += 1
    interval = over_items([(right, total) for right, total in per_item.values()])
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
        n_answers=n,
        n_items=len(per_item),
        n_correct=correct,
        value=interval.value if interval is not None else None,
        ci95=(interval.low, interval.high) if interval is not None else None,
        interval_method=ITEMS_METHOD,
        j_per_correct_answer=per_answer,
        j_per_correct_answer_bound=bound,
        correct_per_kj=per_kj,
        null_reasons=reasons,
    )

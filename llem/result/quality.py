"""result.json's ``quality`` section (schema 6): how many of the window's answers were correct,
and what each correct one cost.

Every request of the measured window is scored after the window ends (``llem.runner.quality``),
so a run of several passes scores each pass's answers: the count of correct answers and the
energy come from the same window. ``value`` is the proportion judged correct over the distinct
items (prompts) answered, each item weighted once whatever its number of answers, with a 95%
interval over items (``interval_method`` names it; schema 8; before, over answers).
``j_per_correct_answer`` is ``energy_basis`` (the window's ``energy.total_j``, as
``j_per_output_token``) over ``n_correct``, with the energy's worst-case bound divided the same
way (the count is exact); ``correct_answers_per_kj`` is its reciprocal in kJ. A null figure has
its reason in ``null_reasons["quality.<field>"]``; a run that scored nothing has a null section
with the reason under ``"quality"``.
"""

from __future__ import annotations

from dataclasses import dataclass

from llem.result.figure import bound, check_bounds, figure, figure_specs


@dataclass(frozen=True)
class Quality:
    task: str  # arithmetic | jsonl | lm_eval:<task name>
    metric: str  # what value is the proportion of: exact_match, accuracy, ...
    scorer: str  # how one answer is judged, in one phrase
    n_answers: int  # requests of the window that were scored (schema 7: n_scored)
    n_correct: int
    n_unreadable: int  # answers the scorer could read nothing from (a number, a letter)
    n_items: int | None = None  # distinct items (prompts) answered (null before schema 8)
    value: float | None = figure()  # the mean over items of each item's proportion correct
    ci95_low: float | None = figure()
    ci95_high: float | None = figure()
    interval_method: str = ""
    energy_basis: str = "energy.total_j"
    j_per_correct_answer: float | None = figure(bounded=True)
    j_per_correct_answer_uncertainty: float | None = bound()
    correct_answers_per_kj: float | None = figure()
    scoring_s: float | None = None  # the scoring's own time, after the window (not in it)

    def __post_init__(self) -> None:
        check_bounds(self)


figure_specs(Quality)

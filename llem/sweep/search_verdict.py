"""Judging a search trial: what it measured, held against the search's declaration (objective and
constraints), as one ``Verdict`` that ``llem.sweep.search.Search`` tells its sampler.

Each declared constraint gets its measured value and the sampler's constraint value
(``Constraint.violation``: <= 0 met); a constrained figure the trial lacks counts as
``MISSING_VIOLATION``, far worse than any miss, with the reason. A trial without the objective, or
whose run does not count (``discount``), is infeasible with its reason; a discounted trial's
figures are kept, but ``Verdict.counts`` is false, so the sampler learns none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llem.figures.digits import plain
from llem.sweep.search_spec import SearchSpec

MISSING_VIOLATION = 1000.0  # a constrained figure the trial lacks: far worse than any miss


@dataclass(frozen=True)
class Verdict:
    """What a trial measured, judged against the declaration."""

    objective: float | None
    constraints: dict[str, float | None]  # constraint text -> measured value
    violations: dict[str, float]  # constraint text -> the sampler's value (<= 0 met)
    feasible: bool
    why_not: str | None
    discounted: str | None = None  # why the run does not count (its figures are not told)
    note: str | None = None  # what the reader should know of a trial that counts

    @property
    def counts(self) -> bool:
        """Whether the sampler may learn the trial's figures."""
        return self.objective is not None and self.discounted is None


def judge(
    spec: SearchSpec,
    values: dict[str, float | None],
    missing: Callable[[str], str] | None = None,
    discount: str | None = None,
    note: str | None = None,
) -> Verdict:
    """Judge measured ``values`` (result key -> figure or None); ``missing(key)`` says why a
    figure is None; ``discount`` why the run does not count at all (infeasible whatever its
    figures); ``note`` what a counted trial's record should say."""

    def why(key: str) -> str:
        return missing(key) if missing is not None else f"{key} was not measured"

    reasons: list[str] = []
    measured: dict[str, float | None] = {}
    violations: dict[str, float] = {}
    for c in spec.constraints:
        value = values.get(c.key)
        measured[c.text] = value
        if value is None:
            violations[c.text] = MISSING_VIOLATION
            reasons.append(f"{c.text}: {why(c.key)}")
            continue
        violations[c.text] = c.violation(value)
        if not c.met(value):
            reasons.append(f"{c.text}: measured {plain(value, 4)}")
    objective = values.get(spec.objective)
    if objective is None:
        reasons.insert(0, f"no objective: {why(spec.objective)}")
    if discount is not None:
        reasons = [f"does not count: {discount}"]  # what it measured says nothing more
    return Verdict(
        objective=objective,
        constraints=measured,
        violations=violations,
        feasible=objective is not None and not reasons,
        why_not="; ".join(reasons) or None,
        discounted=discount,
        note=note,
    )

"""Judging a search trial: what it measured, held against the search's declaration (objective and
constraints), as one ``Verdict`` that ``llem.sweep.search.Search`` tells its sampler.

Each declared constraint gets its measured value and the sampler's constraint value
(``Constraint.violation``: <= 0 met); a constrained figure the trial lacks counts as
``MISSING_VIOLATION``, far worse than any miss, with the reason. A trial without the objective, or
whose run does not count (``discount``), is infeasible with its reason; a discounted trial's
figures are kept, but ``Verdict.counts`` is false, so the sampler learns none of them.

A constraint on a figure that carries a 95% interval (``INTERVAL_ENDS``: ``quality.value``) is
judged on the interval's end that must meet the bound (its lower end for ``>=`` and ``>``, its
upper end for ``<=`` and ``<``): a configuration is feasible only where its interval confirms the
constraint. One whose point estimate meets the bound but whose interval straddles it is
undecided: infeasible, named in ``Verdict.undecided`` and its reason says so. Without the interval
(a result written before it) the point estimate is judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llem.figures.digits import plain
from llem.sweep.search_spec import Constraint, SearchSpec

MISSING_VIOLATION = 1000.0  # a constrained figure the trial lacks: far worse than any miss
# figures judged on their 95% interval: key -> (its lower end, its upper end)
INTERVAL_ENDS: dict[str, tuple[str, str]] = {
    "quality.value": ("quality.ci95_low", "quality.ci95_high"),
}


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
    undecided: tuple[str, ...] = ()  # constraints met by the point but not by its interval

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
    undecided: list[str] = []
    for c in spec.constraints:
        value = values.get(c.key)
        measured[c.text] = value
        if value is None:
            violations[c.text] = MISSING_VIOLATION
            reasons.append(f"{c.text}: {why(c.key)}")
            continue
        judged, interval = _judged(c, value, values)
        violations[c.text] = c.violation(judged)
        if not c.met(value):
            reasons.append(f"{c.text}: measured {plain(value, 4)}")
        elif not c.met(judged):
            undecided.append(c.text)
            reasons.append(
                f"{c.text}: undecided: measured {plain(value, 4)}, but its 95% interval "
                f"{interval} does not confirm it"
            )
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
        undecided=tuple(undecided),
    )


def _judged(c: Constraint, value: float, values: dict[str, float | None]) -> tuple[float, str]:
    """The value ``c`` is judged on (the interval's end that must meet the bound, where the
    figure has an interval) and the interval in words."""
    ends = INTERVAL_ENDS.get(c.key)
    if ends is None:
        return value, ""
    low, high = values.get(ends[0]), values.get(ends[1])
    if low is None or high is None:
        return value, ""
    end = low if c.op in (">=", ">") else high
    return end, f"{plain(low, 3)}-{plain(high, 3)}"

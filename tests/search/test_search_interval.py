"""A quality constraint is judged on its 95% interval (issue: the search constrained on the point
estimate): ``quality.value >= 0.6`` is met only where the interval's lower end is >= 0.6; a trial
whose point meets it but whose interval straddles it is undecided, so infeasible, and says so."""

from __future__ import annotations

import dataclasses

from llem.result import RunResult
from llem.sweep.search_results import verdict_of
from llem.sweep.search_spec import make_spec
from llem.sweep.search_verdict import judge
from tests.search.test_search_quality import JPC, RULE, VALUE, quality_spec, scored


def _with_interval(value: float, low: float | None, high: float | None) -> RunResult:
    r = scored(value, 10.0)
    assert r.quality is not None
    r.quality = dataclasses.replace(r.quality, ci95_low=low, ci95_high=high)
    return r


def test_a_point_that_meets_the_bound_on_an_interval_that_straddles_it_is_undecided() -> None:
    # 10 of 16 right: 0.625, interval 0.39-0.82 (the case)
    verdict = verdict_of(quality_spec(), _with_interval(0.625, 0.39, 0.82))
    assert not verdict.feasible and verdict.undecided == (RULE,)
    assert verdict.why_not == (
        f"{RULE}: undecided: measured 0.625, but its 95% interval 0.39-0.82 does not confirm it"
    )
    assert verdict.violations[RULE] > 0  # the sampler hears a miss, by the lower end


def test_an_interval_above_the_bound_confirms_it() -> None:
    verdict = verdict_of(quality_spec(), _with_interval(0.9, 0.72, 0.97))
    assert verdict.feasible and verdict.undecided == () and verdict.why_not is None
    assert verdict.violations[RULE] <= 0


def test_a_point_below_the_bound_is_a_plain_miss_not_undecided() -> None:
    verdict = verdict_of(quality_spec(), _with_interval(0.5, 0.3, 0.7))
    assert not verdict.feasible and verdict.undecided == ()
    assert verdict.why_not == f"{RULE}: measured 0.5"


def test_an_upper_limit_is_judged_on_the_upper_end() -> None:
    spec = make_spec(JPC, "minimize", [f"{VALUE} <= 0.5"], 5, 0, "tpe")
    values = {JPC: 10.0, VALUE: 0.45, "quality.ci95_low": 0.3, "quality.ci95_high": 0.6}
    verdict = judge(spec, values)
    assert not verdict.feasible and verdict.undecided == (f"{VALUE} <= 0.5",)
    values["quality.ci95_high"] = 0.49
    assert judge(spec, values).feasible


def test_without_an_interval_the_point_is_judged() -> None:
    values = {JPC: 10.0, VALUE: 0.625}
    assert judge(quality_spec(), values).feasible

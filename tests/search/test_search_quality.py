"""A search on quality (issue 32): a constraint on ``quality.value`` and the objective
``quality.j_per_correct_answer``, judged on planted results; a trial whose run scored nothing is
infeasible with the reason, never a met constraint; a search on quality where the dataset scores
no answer stops before anything runs."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from llem.errors import ConfigError
from llem.result import RunResult
from llem.result.keys import needs_energy
from llem.result.quality import Quality
from llem.sweep.search import Search
from llem.sweep.search_config import quality_unavailable
from llem.sweep.search_results import verdict_of
from llem.sweep.search_spec import check_quality, make_spec
from llem.sweep.search_verdict import MISSING_VIOLATION, judge
from tests.search.test_search_core import SIX, space_of

VALUE = "quality.value"
JPC = "quality.j_per_correct_answer"
RULE = f"{VALUE} >= 0.6"


def quality_spec(budget: int = 10):  # type: ignore[no-untyped-def]
    return make_spec(JPC, "minimize", [RULE], budget, 0, "tpe")


def scored(value: float | None, jpc: float | None, valid: bool | None = True) -> RunResult:
    """An ok run whose window's answers were scored: ``value`` correct of 50, ``jpc`` J each."""
    r = RunResult(status="ok")
    r.validity = dataclasses.replace(r.validity, energy_valid=valid)
    if value is None:
        r.null_reasons["quality"] = "dataset.source=builtin has no references"
        return r
    r.quality = Quality(
        task="arithmetic",
        metric="exact_match",
        scorer="number",
        n_answers=50,
        n_correct=round(50 * value),
        n_unreadable=0,
        value=value,
        ci95_low=value - 0.1,
        ci95_high=min(value + 0.1, 1.0),
        interval_method="wilson",
        j_per_correct_answer=jpc,
        j_per_correct_answer_uncertainty=None if jpc is None else jpc * 0.02,
        correct_answers_per_kj=None if jpc is None else 1000.0 / jpc,
    )
    return r


def test_quality_keys_are_an_objective_and_a_constraint() -> None:
    spec = quality_spec()
    assert spec.objective == JPC and spec.keys == [JPC, VALUE]
    assert [c.text for c in spec.constraints] == [RULE]


def test_a_scored_trial_is_judged_on_its_quality() -> None:
    spec = quality_spec()
    met = verdict_of(spec, scored(0.7, 12.5))
    assert met.feasible and met.objective == 12.5 and met.constraints == {RULE: 0.7}
    missed = verdict_of(spec, scored(0.5, 3.0))
    assert not missed.feasible and missed.why_not == f"{RULE}: measured 0.5"
    assert missed.objective == 3.0 and missed.violations[RULE] > 0


def test_a_run_that_scored_nothing_is_infeasible_with_the_reason_never_a_met_constraint() -> None:
    verdict = verdict_of(quality_spec(), scored(None, None))
    assert not verdict.feasible and verdict.objective is None
    assert verdict.violations == {RULE: MISSING_VIOLATION}
    reason = "is null: dataset.source=builtin has no references"
    assert verdict.why_not == f"no objective: {JPC} {reason}; {RULE}: {VALUE} {reason}"


def test_j_per_correct_answer_is_null_with_its_reason_when_nothing_was_correct() -> None:
    run = scored(0.0, None)
    run.null_reasons["quality.j_per_correct_answer"] = "no answer was correct"
    verdict = verdict_of(quality_spec(), run)
    assert not verdict.feasible
    assert verdict.why_not == (
        f"no objective: {JPC} is null: no answer was correct; {RULE}: measured 0"
    )


def test_energy_per_correct_answer_reads_energy_so_invalid_energy_does_not_count() -> None:
    assert needs_energy(JPC) and needs_energy("quality.correct_answers_per_kj")
    assert not needs_energy(VALUE)
    verdict = verdict_of(quality_spec(), scored(0.8, 2.0, valid=False))
    assert not verdict.feasible and verdict.discounted is not None
    assert "its energy is not valid" in (verdict.why_not or "")


def test_the_search_finds_the_least_energy_per_correct_answer_at_the_quality_asked() -> None:
    """Planted: bigger batches cost less per correct answer but answer worse; vllm answers
    better at some cost. The least J per correct answer overall (batch 4 on pytorch, 0.5 right)
    misses the constraint; the best that meets it is batch 4 on vllm (0.65 right)."""

    def measure(knobs: dict[str, str]) -> dict[str, float | None]:
        b = int(knobs["pytorch.batch_size"])
        vllm = knobs["backend"] == "vllm"
        value = 0.9 - 0.1 * b + (0.15 if vllm else 0.0)
        return {JPC: 10.0 / b + (1.0 if vllm else 0.0), VALUE: value}

    search = Search(quality_spec(budget=6), space_of(*SIX))
    n = 0
    while (proposal := search.ask()) is not None:
        n += 1
        search.tell(proposal, str(n), judge(search.spec, measure(dict(proposal.knobs))))
    best = search.record.best_trial()
    assert best is not None and best.knobs == {"pytorch.batch_size": "4", "backend": "vllm"}
    cheapest = min(search.record.trials, key=lambda t: t.objective or 1e9)
    assert cheapest.knobs == {"pytorch.batch_size": "4", "backend": "pytorch"}
    assert not cheapest.feasible


@pytest.mark.parametrize(
    ("dataset", "why"),
    [
        ({"source": "builtin"}, "dataset.source=builtin scores no answer"),
        ({"source": "synthetic"}, "dataset.source=synthetic scores no answer"),
        ({"source": "jsonl", "scorer": None}, "dataset.source=jsonl without dataset.scorer"),
        ({"source": "arithmetic"}, None),
        ({"source": "lm_eval", "task": "gsm8k"}, None),
        ({"source": "jsonl", "scorer": "exact"}, None),
    ],
)
def test_whether_the_dataset_scores_is_known_before_anything_runs(
    dataset: dict[str, object], why: str | None
) -> None:
    found = quality_unavailable(OmegaConf.create({"dataset": dataset}), ["pytorch.batch_size"])
    assert (found is None) == (why is None)
    assert why is None or (found is not None and found.startswith(why))


def test_a_searched_dataset_is_not_judged_by_its_first_point() -> None:
    cfg = OmegaConf.create({"dataset": {"source": "builtin"}})
    assert quality_unavailable(cfg, ["dataset"]) is None
    assert quality_unavailable(cfg, ["dataset.source"]) is None


def test_quality_without_scored_answers_is_a_config_error_naming_the_key() -> None:
    spec = quality_spec()
    check_quality(spec, None)
    with pytest.raises(ConfigError) as caught:
        check_quality(spec, "dataset.source=builtin scores no answer")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"hydra.sweeper.objective: {JPC} needs scored answers")
    assert "dataset.source=builtin scores no answer" in message and "dataset=arithmetic" in message
    on_constraint = make_spec("energy.j_per_output_token", "minimize", [RULE], 5, 0, "tpe")
    with pytest.raises(ConfigError, match=r"^hydra\.sweeper\.constraints: quality\.value "):
        check_quality(on_constraint, "dataset.source=builtin scores no answer")
    check_quality(make_spec("energy.j_per_output_token", "minimize", [], 5, 0, "tpe"), "x")

"""Issue 28 item 4: a trial counts only if its run ended ok and, where the objective or a
constraint is an energy figure, its energy is valid. Otherwise it is infeasible with the reason,
the sampler learns none of its figures, and it is never the best."""

from __future__ import annotations

import dataclasses
from typing import Any

from llem.report.search import SearchView, Trial
from llem.report.search_section import render_search
from llem.result import ErrorInfo, Percentiles, RunResult
from llem.sweep.search import Search
from llem.sweep.search_results import verdict_of
from llem.sweep.search_space import Choices, Space
from llem.sweep.search_spec import Constraint, SearchSpec
from llem.sweep.search_verdict import judge

J = "energy.j_per_output_token"
TPOT = "latency.tpot_ms.p90"
TOKS = "throughput.output_tokens_per_s"
LIMIT = Constraint(TPOT, "<=", 50.0)
ENERGY_SPEC = SearchSpec(J, "minimize", (LIMIT,), 10, 0, "tpe")


def result(
    j: float | None = 0.5,
    tpot: float = 40.0,
    status: str = "ok",
    energy_valid: bool | None = True,
    problems: tuple[str, ...] = (),
) -> RunResult:
    """A run's result with J/token, p90 TPOT and the energy verdict planted."""
    r = RunResult(status=status)
    if status != "ok":
        r.error = ErrorInfo("RuntimeError", "the engine died after the window")
    r.latency.tpot_ms = Percentiles(tpot * 0.8, tpot, tpot * 1.1)
    r.throughput.output_tokens_per_s = 100.0
    r.energy = dataclasses.replace(r.energy, source="nvml_counter", j_per_output_token=j)
    r.validity = dataclasses.replace(r.validity, energy_valid=energy_valid, problems=list(problems))
    return r


def test_a_run_whose_energy_is_not_valid_is_infeasible_with_the_reason() -> None:
    v = verdict_of(ENERGY_SPEC, result(energy_valid=False, problems=("power limit not enforced",)))
    assert not v.feasible and not v.counts
    assert v.objective == 0.5  # the figure stays in the record
    assert v.why_not is not None and v.why_not.startswith("does not count: its energy is not valid")
    assert "power limit not enforced" in v.why_not
    assert verdict_of(ENERGY_SPEC, result()).feasible


def test_a_failed_run_with_figures_is_infeasible_with_the_reason() -> None:
    v = verdict_of(ENERGY_SPEC, result(j=0.12, status="failed"))
    assert not v.feasible and v.objective == 0.12
    assert v.why_not is not None
    assert v.why_not.startswith("does not count: the run failed (RuntimeError: the engine died")


def test_energy_validity_matters_only_where_the_search_reads_energy() -> None:
    speed = SearchSpec(TOKS, "maximize", (LIMIT,), 10, 0, "tpe")
    assert verdict_of(speed, result(energy_valid=False)).feasible
    on_constraint = SearchSpec(TOKS, "maximize", (Constraint(J, "<=", 1.0),), 10, 0, "tpe")
    assert not verdict_of(on_constraint, result(energy_valid=False)).feasible


def test_energy_validity_not_checked_counts_with_a_note() -> None:
    v = verdict_of(ENERGY_SPEC, result(energy_valid=None))
    assert v.feasible and v.counts
    assert v.note == "energy validity not checked (validity.energy_valid=null)"


SPACE = Space(fixed=[], dims=[Choices("pytorch.batch_size", ("1", "2", "4"))],
              order=["pytorch.batch_size"])  # fmt: skip


def drive(measured: dict[str, RunResult]) -> Search:
    search = Search(dataclasses.replace(ENERGY_SPEC, budget=3), SPACE)
    while (proposal := search.ask()) is not None:
        r = measured[proposal.knobs["pytorch.batch_size"]]
        search.tell(proposal, str(len(search.record.trials)), verdict_of(search.spec, r),
                    status=r.status)  # fmt: skip
    return search


def test_neither_an_invalid_nor_a_failed_run_becomes_the_best() -> None:
    """The lowest J/token belongs to runs that do not count: the best is the one that does."""
    search = drive({
        "1": result(j=0.9),
        "2": result(j=0.12, status="failed"),
        "4": result(j=0.1, energy_valid=False, problems=("power limit not enforced",)),
    })  # fmt: skip
    best = search.record.best_trial()
    assert best is not None and best.knobs == {"pytorch.batch_size": "1"}
    by_batch = {t.knobs["pytorch.batch_size"]: t for t in search.record.trials}
    assert by_batch["2"].discounted is not None and by_batch["4"].discounted is not None
    states = {t.params["pytorch.batch_size"]: t.state.name for t in search.study.trials}
    assert sorted(states.values()) == ["COMPLETE", "FAIL", "FAIL"]  # no figure of them learnt


def test_the_report_section_says_why_they_do_not_count(tmp_path: Any) -> None:
    search = drive({
        "1": result(j=0.9),
        "2": result(j=0.12, status="failed"),
        "4": result(j=0.1, energy_valid=False),
    })  # fmt: skip
    rec = search.record
    trials = tuple(Trial(t, tmp_path / t.dir, False) for t in rec.trials)
    view = SearchView(rec, tmp_path, ENERGY_SPEC.constraints, trials, None, None)
    text = render_search(view)
    assert "1 feasible, 2 infeasible: failed ×1, energy not valid ×1" in text, text


def test_judge_with_a_discount_keeps_the_figures_but_is_infeasible() -> None:
    v = judge(ENERGY_SPEC, {J: 0.1, TPOT: 10.0}, discount="the run failed")
    assert (v.objective, v.feasible, v.discounted) == (0.1, False, "the run failed")


def test_the_report_notes_a_best_whose_energy_validity_was_not_checked(tmp_path: Any) -> None:
    from llem.report.repeat_stats import summarise
    from llem.report.search import BestFigures

    search = drive({"1": result(j=0.9, energy_valid=None), "2": result(j=1.0), "4": result(j=2.0)})
    rec = search.record
    trials = tuple(Trial(t, tmp_path / t.dir, False) for t in rec.trials)
    (first,) = [t for t in trials if t.record.number == rec.best]
    best = BestFigures(first, (first.record,), summarise([0.9]), {}, 1)
    view = SearchView(rec, tmp_path, (), trials, best, None)
    assert "note: energy validity not checked (validity.energy_valid=null)" in render_search(view)


def test_a_failed_run_without_figures_gives_one_reason() -> None:
    v = verdict_of(ENERGY_SPEC, result(j=None, status="failed"))
    assert v.why_not == (
        "does not count: the run failed (RuntimeError: the engine died after the window)"
    )

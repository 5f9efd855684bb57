"""The search's parts without Hydra runs: the declaration (``search_spec``), the space
(``search_space``), the ask/tell loop (``search``) and the result keys it names
(``result.keys``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from llem.errors import ConfigError
from llem.hydra.overrides import parse_grid
from llem.result import ErrorInfo, Percentiles, RunResult
from llem.result.keys import needs_energy, numeric_keys, value_at, why_missing
from llem.sweep.search import Search
from llem.sweep.search_space import Choices, Interval, Space, make_space
from llem.sweep.search_spec import Constraint, SearchSpec, check_energy, make_spec
from llem.sweep.search_verdict import MISSING_VIOLATION, judge

J = "energy.j_per_output_token"
TPOT = "latency.tpot_ms.p90"
GOOD = dict(
    objective=J, direction="minimize", constraints=[f"{TPOT} <= 50"], budget=10, seed=0,
    sampler="tpe",
)  # fmt: skip


def config_error(**changes: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        make_spec(**{**GOOD, **changes})
    message = str(caught.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------- the declaration


def test_a_good_declaration_reads_as_written() -> None:
    spec = make_spec(**{**GOOD, "constraints": "goodput.fraction >= 0.99"})
    assert spec.constraints == (Constraint("goodput.fraction", ">=", 0.99),)
    assert spec.keys == [J, "goodput.fraction"]
    assert make_spec(**GOOD).constraints == (Constraint(TPOT, "<=", 50.0),)


@pytest.mark.parametrize(
    ("changes", "starts"),
    [
        ({"objective": "energy.j_per_token"}, "hydra.sweeper.objective=energy.j_per_token:"),
        ({"objective": "compute"}, "hydra.sweeper.objective=compute:"),
        ({"objective": None}, "hydra.sweeper.objective is not set"),
        ({"constraints": [f"{TPOT} <= 50", "latency.tpot_ms.p95 <= 50"]},
         "hydra.sweeper.constraints[1]=latency.tpot_ms.p95:"),
        ({"constraints": [f"{TPOT} =< 50"]}, "hydra.sweeper.constraints[0]="),
        ({"constraints": [f"{TPOT} <= fast"]}, "hydra.sweeper.constraints[0]="),
        ({"constraints": ["<= 50"]}, "hydra.sweeper.constraints[0]="),
        ({"constraints": [f"{TPOT} <= 50", 50]}, "hydra.sweeper.constraints[1]=50"),
        ({"constraints": 50}, "hydra.sweeper.constraints=50:"),
        ({"constraints": 0}, "hydra.sweeper.constraints=0:"),
        ({"budget": 0}, "hydra.sweeper.budget=0:"),
        ({"budget": -3}, "hydra.sweeper.budget=-3:"),
        ({"budget": 2.5}, "hydra.sweeper.budget=2.5:"),
        ({"budget": "10"}, "hydra.sweeper.budget=10:"),
        ({"budget": True}, "hydra.sweeper.budget=True:"),
        ({"seed": 1.5}, "hydra.sweeper.seed=1.5:"),
        ({"direction": "minimise"}, "hydra.sweeper.direction=minimise:"),
        ({"sampler": "cmaes"}, "hydra.sweeper.sampler=cmaes:"),
    ],
)  # fmt: skip
def test_each_bad_declaration_is_one_line_naming_its_key(
    changes: dict[str, Any], starts: str
) -> None:
    assert config_error(**changes).startswith(starts)


def test_the_messages_say_what_is_allowed() -> None:
    assert "allowed values are minimize, maximize" in config_error(direction="up")
    assert "tpe, gp, random" in config_error(sampler="cmaes")
    assert "OP one of <=, >=, <, >" in config_error(constraints=["latency.tpot_ms.p90 == 5"])
    assert ">= 1" in config_error(budget=0)
    # an unknown key lists known ones with the same last part
    assert "latency.tpot_ms.p90" in config_error(objective="latency.tpot_s.p90")


@pytest.mark.parametrize(
    ("text", "value", "sign"),
    [
        ("latency.tpot_ms.p90 <= 50", 40.0, -1),
        ("latency.tpot_ms.p90 <= 50", 50.0, 0),
        ("latency.tpot_ms.p90 <= 50", 60.0, 1),
        ("goodput.fraction >= 0.95", 0.99, -1),
        ("goodput.fraction >= 0.95", 0.95, 0),
        ("goodput.fraction >= 0.95", 0.90, 1),
        ("latency.tpot_ms.p90 < 50", 50.0, 1),  # a strict bound only touched is a miss
        ("goodput.fraction > 0.95", 0.95, 1),
    ],
)
def test_a_violation_is_positive_exactly_when_the_constraint_is_missed(
    text: str, value: float, sign: int
) -> None:
    (c,) = make_spec(**{**GOOD, "constraints": [text]}).constraints
    v = c.violation(value)
    assert (v > 0) == (sign > 0) and (v < 0) == (sign < 0)
    assert c.met(value) == (v <= 0)


def test_violations_are_relative_so_ms_and_fractions_weigh_alike() -> None:
    assert Constraint(TPOT, "<=", 50).violation(55) == pytest.approx(0.1)
    assert Constraint("goodput.fraction", ">=", 0.9).violation(0.81) == pytest.approx(0.1)


def test_energy_on_a_device_without_energy_is_a_config_error_naming_what_can_be_searched() -> None:
    spec = make_spec(**GOOD)
    check_energy(spec, None)  # energy measured: fine
    with pytest.raises(ConfigError) as caught:
        check_energy(spec, "no GPU on this machine")
    message = str(caught.value)
    assert message.startswith("hydra.sweeper.objective: energy.j_per_output_token needs")
    assert "no GPU on this machine" in message and "throughput.output_tokens_per_s" in message
    on_constraint = make_spec(
        **{**GOOD, "objective": "throughput.output_tokens_per_s", "constraints": [f"{J} <= 2"]}
    )
    with pytest.raises(ConfigError, match=r"^hydra\.sweeper\.constraints: "):
        check_energy(on_constraint, "no GPU on this machine")
    without = make_spec(**{**GOOD, "objective": "throughput.output_tokens_per_s"})
    check_energy(without, "no GPU on this machine")


# ---------------------------------------------------------------------- the space


def space_of(*overrides: str) -> Space:
    return make_space(parse_grid(list(overrides)))


def test_numeric_choices_are_ordered_by_value_and_others_are_categories() -> None:
    s = space_of("pytorch.batch_size=8,1,32,4", "backend=pytorch,vllm", "decoder.max_new_tokens=16")
    batch, backend = s.dims
    assert isinstance(batch, Choices) and batch.ordered
    assert batch.by_value == ("1", "4", "8", "32")
    assert [batch.param(v) for v in ("1", "4", "8", "32", "32.0", "7")] == [0, 1, 2, 3, 3, None]
    assert isinstance(backend, Choices) and not backend.ordered
    assert s.fixed == ["decoder.max_new_tokens=16"] and s.size == 8
    assert s.keys == ["pytorch.batch_size", "backend"]


def test_ranges_are_ordered_choices() -> None:
    (dim,) = space_of("vllm.max_num_seqs=range(8,40,8)").dims
    assert isinstance(dim, Choices) and dim.ordered and dim.by_value == ("8", "16", "24", "32")


@pytest.mark.parametrize(
    ("written", "low", "high", "log", "whole"),
    [
        ("interval(100,400)", 100, 400, False, True),
        ("interval(0.5,2.5)", 0.5, 2.5, False, False),
        ("tag(log,interval(0.5,8))", 0.5, 8, True, False),
        ("tag(log,interval(1,64))", 1, 64, True, True),
    ],
)
def test_intervals_whole_float_and_log(
    written: str, low: float, high: float, log: bool, whole: bool
) -> None:
    s = space_of(f"gpu.power_limit_w={written}", "pytorch.batch_size=1,2,4")
    dim = s.dims[0]
    assert dim == Interval("gpu.power_limit_w", low, high, log, whole)
    assert s.size is None  # a continuous dimension: no finite size
    assert s.describe()[0] == f"gpu.power_limit_w={written}"
    assert dim.param(str(high + 1)) is None and dim.param(str(low)) is not None


@pytest.mark.parametrize(
    "written", ["interval(400,100)", "tag(log,interval(0,8))", "tag(log,interval(-1,8))"]
)
def test_a_bad_interval_is_a_config_error_naming_the_key(written: str) -> None:
    with pytest.raises(ConfigError, match=r"^gpu\.power_limit_w="):
        space_of(f"gpu.power_limit_w={written}")


def test_repeat_cannot_be_a_dimension() -> None:
    with pytest.raises(ConfigError) as caught:
        space_of("pytorch.batch_size=1,2", "repeat=0,1,2")
    assert str(caught.value).startswith("repeat=0,1,2: a search measures each configuration once")
    assert "hydra.sweeper.confirm" in str(caught.value)
    assert space_of("repeat=1").fixed == ["repeat=1"]  # one repeat value is fine


def test_knobs_round_trip_through_a_trials_overrides() -> None:
    s = space_of("pytorch.batch_size=1,2,4", "dataset.n_prompts=8", "backend=pytorch,vllm")
    knobs = {"pytorch.batch_size": "4", "backend": "vllm"}
    written = s.overrides(knobs)
    assert written == ["pytorch.batch_size=4", "dataset.n_prompts=8", "backend=vllm"]
    assert s.knobs_of(written) == knobs
    # not a point of this space: a fixed override that differs, a value outside, a knob missing
    assert s.knobs_of(["pytorch.batch_size=4", "dataset.n_prompts=16", "backend=vllm"]) is None
    assert s.knobs_of(["pytorch.batch_size=3", "dataset.n_prompts=8", "backend=vllm"]) is None
    assert s.knobs_of(["dataset.n_prompts=8", "backend=vllm"]) is None


def test_the_size_is_the_product_of_the_choices() -> None:
    s = space_of(
        "pytorch.batch_size=1,2,4,8", "backend=pytorch,vllm", "decoder.max_new_tokens=8,16,32"
    )
    assert s.size == 24 == len(list(s.every_point()))
    assert len({s.canonical(k) for k in s.every_point()}) == 24


def test_neighbours_are_one_ordered_step_or_another_category() -> None:
    s = space_of("pytorch.batch_size=8,1,32,4", "backend=pytorch,vllm,tensorrt")
    got = s.neighbours({"pytorch.batch_size": "8", "backend": "vllm"})
    assert sorted((k["pytorch.batch_size"], k["backend"]) for k in got) == [
        ("32", "vllm"), ("4", "vllm"), ("8", "pytorch"), ("8", "tensorrt"),
    ]  # fmt: skip
    at_the_end = s.neighbours({"pytorch.batch_size": "32", "backend": "vllm"})
    assert [k["pytorch.batch_size"] for k in at_the_end if k["backend"] == "vllm"] == ["8"]


# ---------------------------------------------------------------------- the loop

SIX = ("pytorch.batch_size=1,2,4", "backend=pytorch,vllm")


def spec(budget: int, seed: int = 0, constraints: tuple[Constraint, ...] = ()) -> SearchSpec:
    return SearchSpec(J, "minimize", constraints, budget, seed, "tpe")


def planted(knobs: dict[str, str]) -> dict[str, float | None]:
    """A plain function of the six-point space: least at batch 4 on vllm."""
    j = 1.0 / int(knobs["pytorch.batch_size"]) + (0.0 if knobs["backend"] == "vllm" else 0.5)
    return {J: j, TPOT: 10.0 * int(knobs["pytorch.batch_size"])}


def drive(search: Search, measure: Any = planted, missing: Any = None) -> list[dict[str, str]]:
    """Ask and tell until the search is over; the knobs of every trial run, in order."""
    ran = []
    while (proposal := search.ask()) is not None:
        ran.append(dict(proposal.knobs))
        verdict = judge(search.spec, measure(proposal.knobs), missing)
        search.tell(proposal, str(len(ran)), verdict)
    return ran


def test_no_configuration_runs_twice_and_the_search_stops_when_all_were_measured() -> None:
    search = Search(spec(budget=10), space_of(*SIX))
    ran = drive(search)
    assert len(ran) == 6
    assert len({tuple(sorted(k.items())) for k in ran}) == 6
    assert search.stop_reason() == "every configuration of the space (6) was measured"
    best = search.record.best_trial()
    assert best is not None and best.knobs == {"pytorch.batch_size": "4", "backend": "vllm"}


def test_a_trial_without_the_objective_is_infeasible_with_the_reason_and_not_rerun() -> None:
    broken = {"pytorch.batch_size": "4", "backend": "vllm"}  # the best one, were it measured

    def measure(knobs: dict[str, str]) -> dict[str, float | None]:
        return {J: None, TPOT: 40.0} if knobs == broken else planted(knobs)

    search = Search(spec(budget=10), space_of(*SIX))
    ran = drive(search, measure, missing=lambda key: f"{key} is null: no GPU")
    assert ran.count(broken) == 1 and len(ran) == 6
    (record,) = [t for t in search.record.trials if t.knobs == broken]
    assert not record.feasible and record.objective is None
    assert record.why_not == f"no objective: {J} is null: no GPU"
    best = search.record.best_trial()
    assert best is not None and best.knobs != broken
    failed = [t for t in search.study.trials if t.state.name == "FAIL"]
    assert failed, "the sampler was told the trial failed, not given a value"


def test_a_missing_constrained_figure_is_infeasible() -> None:
    limit = Constraint(TPOT, "<=", 50.0)
    verdict = judge(spec(5, constraints=(limit,)), {J: 0.1, TPOT: None})
    assert not verdict.feasible and verdict.objective == 0.1
    assert verdict.violations == {limit.text: MISSING_VIOLATION}
    assert verdict.why_not == f"{limit.text}: {TPOT} was not measured"
    met = judge(spec(5, constraints=(limit,)), {J: 0.1, TPOT: 49.0})
    assert met.feasible and met.why_not is None and met.violations[limit.text] < 0
    missed = judge(spec(5, constraints=(limit,)), {J: 0.1, TPOT: 51.0})
    assert not missed.feasible and missed.why_not == f"{limit.text}: measured 51"


def test_a_resumed_search_measures_exactly_the_rest_of_its_budget_and_nothing_told() -> None:
    space = space_of("pytorch.batch_size=1,2,4,8,16", "gpu.power_limit_w=100,200,300,400,500")

    def measure(knobs: dict[str, str]) -> dict[str, float | None]:
        b, p = int(knobs["pytorch.batch_size"]), int(knobs["gpu.power_limit_w"])
        return {J: 1.0 / b + abs(p - 300) / 1000, TPOT: 3.0 * b}

    first = Search(spec(budget=4, seed=1), space)
    done = drive(first, measure)
    assert len(done) == 4
    again = Search(spec(budget=11, seed=1), space)
    for t in first.record.trials:
        again.resume(t.dir, t.knobs, judge(again.spec, measure(t.knobs)))
    assert again.searched == 4 and len(again.study.trials) == 4
    new = drive(again, measure)
    assert len(new) == 11 - 4
    assert not [k for k in new if k in done]
    assert len({tuple(sorted(k.items())) for k in new}) == len(new)
    assert all(t.resumed for t in again.record.trials[:4])
    assert not any(t.resumed for t in again.record.trials[4:])


def test_confirm_measures_the_best_again_after_the_budget() -> None:
    search = Search(spec(budget=4), space_of(*SIX), confirm=2)
    drive(search)
    kinds = [t.kind for t in search.record.trials]
    assert kinds == ["search"] * 4 + ["confirm"] * 2
    best = search.record.best_trial()
    assert best is not None and best.kind == "search"
    confirms = search.record.confirmations()
    assert [t.knobs for t in confirms] == [best.knobs, best.knobs]
    assert [t.overrides[-1] for t in confirms] == ["repeat=1", "repeat=2"]
    assert search.searched == 4 and search.ask() is None


# ---------------------------------------------------------------------- result keys


def test_the_keys_the_readme_names_are_numeric_figures() -> None:
    keys = numeric_keys()
    named = [
        "energy.j_per_output_token", "steady_state.j_per_output_token", "latency.tpot_ms.p90",
        "latency.ttft_ms.p90", "goodput.fraction", "throughput.output_tokens_per_s",
    ]  # fmt: skip
    assert [k for k in named if k not in keys] == []
    assert not [k for k in keys if k.endswith("_uncertainty") or k.startswith("hardware.")]
    assert needs_energy(J) and needs_energy("steady_state.j_per_output_token")
    assert not needs_energy(TPOT) and not needs_energy("goodput.fraction")


def test_value_at_reads_a_figure_and_why_missing_says_why_there_is_none() -> None:
    r = RunResult(status="ok")
    r.latency.tpot_ms = Percentiles(10.0, 20.0, 30.0)
    r.throughput.output_tokens_per_s = 123.0
    r.energy = dataclasses.replace(r.energy, source="unavailable", unavailable_reason="no GPU")
    assert value_at(r, TPOT) == 20.0 and value_at(r, "throughput.output_tokens_per_s") == 123.0
    assert value_at(r, "goodput.fraction") is None
    assert why_missing(r, "goodput.fraction") == "the result has no goodput section"
    assert value_at(r, J) is None
    assert why_missing(r, J) == f"{J} is null: energy unavailable (no GPU)"
    r.latency.ttft_ms = Percentiles(1.0, math.nan, None)
    assert value_at(r, "latency.ttft_ms.p90") is None
    r.null_reasons["latency.ttft_ms"] = "one output token only"
    assert (
        why_missing(r, "latency.ttft_ms.p90")
        == "latency.ttft_ms.p90 is null: one output token only"
    )
    failed = RunResult(status="failed", error=ErrorInfo("OutOfMemoryError", "CUDA out of memory"))
    assert why_missing(failed, TPOT) == "the run failed (OutOfMemoryError: CUDA out of memory)"

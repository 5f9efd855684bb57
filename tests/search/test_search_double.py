"""The issue's bar: on a planted function of about 100 configurations (known optimum, 0.5% noise),
the default search (tpe, budget 30) measures the true constrained optimum and reports it as the
best feasible for at least 9 of seeds 0..9, on two functions of different shapes; random sampling
with the same budget does clearly worse (so the bar is not met by any search at all)."""

from __future__ import annotations

import pytest

from llem.sweep.search import MAX_REPEATED
from llem.sweep.search_space import Choices
from llem.testing.search_double import (
    GOODPUT,
    TPOT_P90,
    OptimumFound,
    Planted,
    PlantedRun,
    PlantedServing,
    search_until,
)

SEEDS = range(10)
BUDGET = 30
DOUBLES = {"run": PlantedRun, "serving": PlantedServing}


def searches(kind: str, sampler: str) -> list[tuple[Planted, OptimumFound]]:
    out = []
    for seed in SEEDS:
        double = DOUBLES[kind](seed=seed)
        out.append((double, search_until(double, double.spec(seed, BUDGET, sampler))))
    return out


@pytest.fixture(scope="module", params=sorted(DOUBLES))
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def tpe(kind: str) -> list[tuple[Planted, OptimumFound]]:
    return searches(kind, "tpe")


@pytest.fixture(scope="module")
def random_sampler(kind: str) -> list[tuple[Planted, OptimumFound]]:
    return searches(kind, "random")


def found(runs: list[tuple[Planted, OptimumFound]]) -> list[int]:
    """The seeds whose search measured the optimum within the budget and reported it as best."""
    return [
        seed
        for seed, (_, f) in zip(SEEDS, runs, strict=True)
        if f.measured_at is not None and f.measured_at <= BUDGET and f.reported
    ]


def test_the_planted_spaces_are_about_100_points_with_the_issue_shapes() -> None:
    run, serving = PlantedRun(), PlantedServing()
    assert run.space().size == serving.space().size == 100
    assert run.optimum() == {"pytorch.batch_size": "64", "gpu.power_limit_w": "300"}
    assert serving.optimum() == {"quantization": "bnb-8bit", "vllm.max_num_seqs": "48"}
    # serving: a category times an ordered knob, maximized under a '>=' constraint
    spec = serving.spec(0)
    assert spec.direction == "maximize"
    assert [(c.key, c.op) for c in spec.constraints] == [(GOODPUT, ">=")]
    quant, seqs = serving.space().dims
    assert isinstance(quant, Choices) and isinstance(seqs, Choices)
    assert not quant.ordered and seqs.ordered
    assert run.spec(0).constraints[0].key == TPOT_P90


def test_the_constraint_matters_better_points_exist_outside_it() -> None:
    for double in (PlantedRun(), PlantedServing()):
        spec = double.spec(0)
        target = double.figures(double.optimum())[spec.objective]
        better = [
            k
            for k in double.space().every_point()
            if spec.better(double.figures(k)[spec.objective], target)
        ]
        assert better and not any(double.feasible(k) for k in better)


@pytest.mark.slow
def test_tpe_finds_and_reports_the_constrained_optimum_for_9_of_10_seeds(
    kind: str, tpe: list[tuple[Planted, OptimumFound]]
) -> None:
    seeds = found(tpe)
    assert len(seeds) >= 9, f"{kind}: optimum found and reported for seeds {seeds} only"
    assert all(f.trials == BUDGET for _, f in tpe)


@pytest.mark.slow
def test_the_best_reported_is_never_infeasible(
    kind: str,
    tpe: list[tuple[Planted, OptimumFound]],
    random_sampler: list[tuple[Planted, OptimumFound]],
) -> None:
    for double, f in tpe + random_sampler:
        best = f.record.best_trial()
        assert best is not None
        assert best.feasible and best.why_not is None
        assert double.feasible(best.knobs), f"{kind}: {best.knobs} is infeasible in truth"
        # and it is the best feasible trial the search measured
        feasible = [t.objective for t in f.record.trials if t.feasible and t.objective is not None]
        pick = min if double.spec(0).direction == "minimize" else max
        assert best.objective == pick(feasible)


def test_random_sampling_with_the_same_budget_finds_it_for_clearly_fewer_seeds(
    kind: str,
    tpe: list[tuple[Planted, OptimumFound]],
    random_sampler: list[tuple[Planted, OptimumFound]],
) -> None:
    by_tpe, by_random = found(tpe), found(random_sampler)
    assert len(by_random) <= len(by_tpe) - 4, f"{kind}: tpe {by_tpe}, random {by_random}"


@pytest.mark.slow
def test_the_gp_sampler_finds_the_optimum_and_stops_repeating_measured_points() -> None:
    """sampler=gp on the batch x power space. Once the neighbours of the best are measured, the GP
    keeps proposing measured points; each proposal refits it to every trial told, so the search
    gives up after a few repeats and takes an untried point (without that limit a search of 30
    trials took minutes)."""
    runs = []
    for seed in range(3):
        double = PlantedRun(seed=seed)
        runs.append(search_until(double, double.spec(seed, BUDGET, "gp")))
    for f in runs:
        assert f.trials == BUDGET
        assert f.record.repeated_proposals <= MAX_REPEATED["gp"] * BUDGET
    assert sum(f.measured_at is not None and f.reported for f in runs) >= 2

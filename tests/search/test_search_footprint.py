"""A search on carbon or cost (docs/footprint.md): a footprint figure is an objective or a
constraint like any numeric figure of result.json; carbon and energy cost read measured energy
(capacity cost does not); a search that reads one whose factor is not given stops before anything
runs, one line naming the key and the settings that would give it; a trial judged on planted
footprint figures."""

from __future__ import annotations

import pytest

from llem.errors import ConfigError
from llem.result import RunResult
from llem.result.footprint import Footprint
from llem.result.keys import needs_energy
from llem.sweep.search_results import verdict_of
from llem.sweep.search_spec import check_footprint, make_spec

G = "footprint.g_per_output_token"
ENERGY_USD = "footprint.energy_usd_per_million_output_tokens"
CAPACITY_USD = "footprint.capacity_usd_per_million_output_tokens"


def test_carbon_and_energy_cost_read_energy_and_capacity_cost_does_not() -> None:
    assert needs_energy(G) and needs_energy("footprint.carbon_g") and needs_energy(ENERGY_USD)
    assert needs_energy("footprint.g_per_correct_answer")
    assert not needs_energy(CAPACITY_USD) and not needs_energy("footprint.capacity_cost_usd")
    assert not needs_energy("footprint.intensity_g_per_kwh")


@pytest.mark.parametrize(
    ("objective", "constraints", "given", "line"),
    [
        (G, [], set(), f"hydra.sweeper.objective: {G} needs a grid intensity, and none is given "
         "(allowed: set carbon.intensity_g_per_kwh or carbon.country or carbon.zone; "
         "docs/footprint.md)"),
        ("energy.j_per_output_token", [f"{ENERGY_USD} <= 2"], {"carbon.country"},
         f"hydra.sweeper.constraints: {ENERGY_USD} needs an energy price, and none is given "
         "(allowed: set cost.usd_per_kwh; docs/footprint.md)"),
        (CAPACITY_USD, [], {"cost.usd_per_kwh"},
         f"hydra.sweeper.objective: {CAPACITY_USD} needs a capacity price, and none is given "
         "(allowed: set cost.usd_per_gpu_hour or cost.usd_per_node_hour; docs/footprint.md)"),
    ],
)  # fmt: skip
def test_a_footprint_figure_without_its_factor_is_one_line_naming_the_key(
    objective: str, constraints: list[str], given: set[str], line: str
) -> None:
    spec = make_spec(objective, "minimize", constraints, 5, 0, "tpe")
    with pytest.raises(ConfigError) as caught:
        check_footprint(spec, given.__contains__)
    assert str(caught.value) == line


@pytest.mark.parametrize(
    ("objective", "given"),
    [
        (G, {"carbon.intensity_g_per_kwh"}),
        (G, {"carbon.country"}),
        (G, {"carbon.zone"}),
        (ENERGY_USD, {"cost.usd_per_kwh"}),
        (CAPACITY_USD, {"cost.usd_per_node_hour"}),
        ("energy.j_per_output_token", set()),  # no footprint figure: nothing to give
    ],
)
def test_a_footprint_figure_with_its_factor_passes(objective: str, given: set[str]) -> None:
    check_footprint(make_spec(objective, "minimize", [], 5, 0, "tpe"), given.__contains__)


def _run(g: float | None, why: str = "") -> RunResult:
    r = RunResult(status="ok")
    if g is None:
        r.null_reasons[G] = why
        return r
    r.footprint = Footprint(layer="gpu", layer_label="measured", g_per_output_token=g)
    return r


def test_a_trial_is_judged_on_its_planted_carbon_and_a_null_one_is_infeasible_with_why() -> None:
    spec = make_spec(G, "minimize", [f"{G} <= 0.05"], 5, 0, "tpe")
    met = verdict_of(spec, _run(0.04))
    assert met.feasible and met.objective == 0.04
    missed = verdict_of(spec, _run(0.06))
    assert not missed.feasible and missed.why_not == f"{G} <= 0.05: measured 0.06"
    null = verdict_of(spec, _run(None, "no layer was measured here"))
    assert not null.feasible and null.objective is None
    assert "no layer was measured here" in (null.why_not or "")

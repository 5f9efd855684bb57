"""Carbon and cost per unit of work, and the modelled layers, against figures worked out by hand;
the result's sections on a hand-built result (energy measured, energy unavailable)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llem.config.footprint import CarbonConfig
from llem.config.schema import ExperimentConfig
from llem.errors import PreflightError
from llem.figures.footprint import (
    Layer,
    WorkDone,
    carbon_figures,
    chassis_model,
    energy_cost_figures,
    facility,
)
from llem.result import Figure, RunResult
from llem.result.boundary import Boundary
from llem.result.footprint import MEASURED, MODELLED
from llem.runner.footprint import fill_footprint
from llem.runner.grid_intensity import country_intensity, resolve


def test_carbon_per_unit_from_a_planted_energy():
    # 7.2 MJ = 2 kWh at 400 g/kWh: 800 g; 1,000 tokens, 50 requests, 20 correct
    got = carbon_figures(Figure(7.2e6, 3.6e5), 400.0, WorkDone(1000, 50, 20))
    assert got["carbon_g"].value == pytest.approx(800.0)
    assert got["carbon_g"].bound == pytest.approx(40.0)  # 0.1 kWh x 400
    assert got["g_per_output_token"].value == pytest.approx(0.8)
    assert got["g_per_1k_output_tokens"].value == pytest.approx(800.0)
    assert got["g_per_request"].value == pytest.approx(16.0)
    assert got["g_per_correct_answer"].value == pytest.approx(40.0)
    assert got["g_per_correct_answer"].bound == pytest.approx(2.0)


def test_energy_cost_per_million_tokens_from_a_planted_energy():
    # 2 kWh at 0.15 USD/kWh = 0.30 USD over 1,000 tokens: 300 USD per million
    got = energy_cost_figures(Figure(7.2e6), 0.15, WorkDone(1000, 50, None, "not scored"))
    assert got["energy_cost_usd"].value == pytest.approx(0.30)
    assert got["energy_usd_per_million_output_tokens"].value == pytest.approx(300.0)
    assert got["energy_usd_per_correct_answer"].null_reason == "not scored"


def test_a_null_energy_gives_null_carbon_with_its_reason():
    got = carbon_figures(Figure.null("no GPU here"), 400.0, WorkDone(1000, 50, None))
    assert {f.null_reason for f in got.values()} >= {"no GPU here"}
    assert all(f.value is None for f in got.values())


def test_the_modelled_layers_follow_their_stated_models():
    node = Layer("node", Figure(1000.0, 10.0), MEASURED, "nvml_counter + RAPL")
    # (1000 x 1.1 + 20 W x 5 s) / 0.8 = 1500 J; bound 10 x 1.1 / 0.8 = 13.75 J
    wall = chassis_model(node, 5.0, psu_efficiency=0.8, other_share=0.1, other_w=20.0)
    assert (wall.energy.value, wall.energy.bound) == (pytest.approx(1500.0), pytest.approx(13.75))
    assert wall.label == MODELLED
    assert wall.parameters == {
        "base_layer": "node",
        "psu_efficiency": 0.8,
        "other_share": 0.1,
        "other_w": 20.0,
    }
    fac = facility(wall, 1.2)
    assert fac.energy.value == pytest.approx(1800.0)
    assert fac.label == MODELLED
    assert fac.parameters == {"base_layer": "chassis", "pue": 1.2}


def _result(gpu_j: float | None, window_s: float | None) -> RunResult:
    r = RunResult(status="ok")
    r.workload.output_tokens, r.workload.requests = 2000, 40
    r.set_figure("energy.window_s", Figure(window_s) if window_s else Figure.null("none"))
    r.boundary = Boundary(boundary="gpu", gpus=["GPU-a", "GPU-b"])
    if gpu_j is None:
        r.set_figure("boundary.gpu_j", Figure.null("NVML unavailable"))
    else:
        r.set_figure("boundary.gpu_j", Figure(gpu_j, 36.0))
    return r


def _exp(**sections: dict) -> ExperimentConfig:
    exp = ExperimentConfig()
    for name, values in sections.items():
        for key, value in values.items():
            setattr(getattr(exp, name), key, value)
    return exp


def test_the_sections_from_a_measured_gpu_layer_and_user_prices():
    exp = _exp(
        carbon={"intensity_g_per_kwh": 400.0, "label": "planted"},
        cost={"usd_per_kwh": 0.2, "usd_per_gpu_hour": 2.5, "usd_per_node_hour": 4.0},
        facility={"pue": 1.25},
    )
    r = _result(3600.0, 360.0)  # 1 Wh, 0.1 h, 2 GPUs
    fill_footprint(exp, r, None)
    assert r.layers is not None and r.footprint is not None
    assert (r.layers.gpu_label, r.layers.widest_measured) == (MEASURED, "gpu")
    assert r.layers.facility_j == pytest.approx(4500.0)
    assert r.layers.facility_label == MODELLED
    assert r.null_reasons["layers.chassis_j"].startswith("chassis.source=none")
    fp = r.footprint
    assert (fp.layer, fp.layer_label) == ("gpu", MEASURED)  # the widest measured, not facility
    assert fp.carbon_g == pytest.approx(0.4)
    assert fp.g_per_1k_output_tokens == pytest.approx(0.2)
    assert fp.g_per_1k_output_tokens_uncertainty == pytest.approx(0.002)  # 36 J = 0.01 Wh
    assert fp.intensity_basis == "location"
    assert fp.intensity_source == "user value (carbon.intensity_g_per_kwh): planted"
    assert fp.energy_usd_per_million_output_tokens == pytest.approx(0.0002 / 2000 * 1e6)
    # capacity: 0.1 h x (2 x 2.5 + 4) = 0.9 USD over 2,000 tokens = 450 USD per million
    assert fp.capacity_cost_usd == pytest.approx(0.9)
    assert fp.capacity_usd_per_million_output_tokens == pytest.approx(450.0)
    assert r.null_reasons["footprint.g_per_correct_answer"].startswith("quality was not scored")


def test_energy_unavailable_nulls_carbon_with_the_reason_and_keeps_capacity_cost():
    exp = _exp(carbon={"intensity_g_per_kwh": 400.0}, cost={"usd_per_node_hour": 3.6})
    r = _result(None, 100.0)
    fill_footprint(exp, r, None)
    fp = r.footprint
    assert fp is not None and fp.g_per_output_token is None
    assert "NVML unavailable" in r.null_reasons["footprint.g_per_output_token"]
    assert fp.capacity_cost_usd == pytest.approx(0.1)  # 100 s x 3.6 USD/h
    assert fp.capacity_usd_per_million_output_tokens == pytest.approx(50.0)


def test_a_modelled_chassis_is_labelled_modelled_and_never_picked_by_default():
    exp = _exp(chassis={"psu_efficiency": 0.9}, carbon={"intensity_g_per_kwh": 100.0})
    exp.chassis.source = type(exp.chassis.source)("model")
    r = _result(900.0, 10.0)
    fill_footprint(exp, r, None)
    assert r.layers is not None and r.layers.chassis_label == MODELLED
    assert r.layers.chassis_j == pytest.approx(1000.0)
    assert r.footprint is not None and r.footprint.layer == "gpu"


def test_older_results_load_without_the_sections(tmp_path: Path):
    r = RunResult(status="ok")
    data = r.to_json()
    del data["layers"], data["footprint"]
    back = RunResult.from_json(data)
    assert back.layers is None and back.footprint is None


@pytest.fixture
def codecarbon_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in of CodeCarbon's package with its data file laid out as the wheel has it
    (codecarbon 3.3.2: codecarbon/data/private_infra/global_energy_mix.json)."""
    pkg = tmp_path / "site" / "codecarbon"
    data = pkg / "data" / "private_infra"
    data.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('llem reads the data without importing')")
    mix = {"FRA": {"carbon_intensity": 56.039, "country_name": "France", "year": 2023}}
    (data / "global_energy_mix.json").write_text(json.dumps(mix))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return pkg


def test_a_country_resolves_offline_through_codecarbons_data(codecarbon_data):
    got = country_intensity("fra")
    assert got.g_per_kwh == pytest.approx(56.039)
    assert got.basis == "location"
    assert "FRA (France), 2023 annual average" in got.source


def test_an_unknown_country_is_refused_in_one_line(codecarbon_data):
    with pytest.raises(PreflightError) as caught:
        resolve(CarbonConfig(country="XYZ"))
    assert caught.value.problems == [
        "carbon.country=XYZ is not a country in CodeCarbon's grid data (allowed: an ISO 3166-1 "
        "alpha-3 code it holds, e.g. FRA, USA, DEU; 1 codes in global_energy_mix.json)"
    ]


def test_a_country_without_codecarbon_says_to_install_the_extra(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(PreflightError) as caught:
        resolve(CarbonConfig(country="FRA"))
    assert "pip install 'llem[carbon]'" in caught.value.problems[0]


def test_the_default_layer_is_the_widest_measured_one():
    exp = _exp(carbon={"intensity_g_per_kwh": 360.0})
    r = _result(3600.0, 10.0)
    r.boundary = Boundary(boundary="node", gpus=["GPU-a"])
    r.set_figure("boundary.gpu_j", Figure(3600.0, 1.0))
    r.set_figure("boundary.total_j", Figure(7200.0, 2.0))
    fill_footprint(exp, r, None)
    assert r.layers is not None and r.layers.widest_measured == "node"
    assert r.footprint is not None and r.footprint.layer == "node"
    assert r.footprint.carbon_g == pytest.approx(0.72)  # 2 Wh at 360 g/kWh

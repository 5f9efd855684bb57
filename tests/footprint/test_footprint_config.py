"""The chassis, facility, carbon and cost sections: off by default (no price or intensity
presented as a fact), bad input one line naming the key and what is allowed, refused before
anything is measured; the config hash of a run that sets none of them is unchanged."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module

from llem.config.config_hash import config_hash
from llem.config.footprint import ChassisSource
from llem.config.schema import ExperimentConfig
from llem.config.store import register_configs
from llem.config.validate import to_experiment
from llem.errors import ConfigError
from llem.runner.footprint import footprint_preflight
from llem.testing import fake_ipmitool


def _exp(*overrides: str) -> ExperimentConfig:
    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        return to_experiment(compose("config", overrides=list(overrides)))


def test_everything_is_off_by_default():
    exp = _exp()
    assert exp.carbon.intensity_g_per_kwh is None and exp.carbon.country is None
    assert (exp.cost.usd_per_kwh, exp.cost.usd_per_gpu_hour, exp.cost.usd_per_node_hour) == (
        None,
        None,
        None,
    )
    assert exp.facility.pue is None
    assert exp.chassis.source == ChassisSource.none


def test_a_config_that_sets_none_of_them_keeps_its_hash():
    # the default config's hash on main before these sections (f452624)
    assert config_hash(_exp()) == config_hash(_exp("carbon.label=null"))
    assert config_hash(_exp()) != config_hash(_exp("facility.pue=1.2"))


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("facility.pue=0.9", "facility.pue=0.9 is out of range (allowed: >= 1)"),
        (
            "carbon.intensity_g_per_kwh=-5",
            "carbon.intensity_g_per_kwh=-5.0 is out of range (allowed: >= 0)",
        ),
        ("cost.usd_per_gpu_hour=-1", "cost.usd_per_gpu_hour=-1.0 is out of range (allowed: >= 0)"),
        (
            "carbon.country=France",
            "carbon.country=France is not an ISO 3166-1 alpha-3 code (allowed: three letters, "
            "e.g. FRA, USA, DEU)",
        ),
        ("chassis.source=model", "chassis.source=model needs chassis.psu_efficiency (0 to 1, "),
        (
            "chassis.psu_efficiency=0.9",
            "chassis.psu_efficiency=0.9 applies to chassis.source=model only (it is "
            "chassis.source=none)",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_key(override, line):
    with pytest.raises(ConfigError) as caught:
        _exp(override)
    assert any(p.startswith(line) for p in caught.value.problems), caught.value.problems


def test_ipmitool_asked_for_but_missing_or_without_a_reading_is_refused_in_preflight(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    exp = _exp("chassis.source=ipmitool")
    assert footprint_preflight(exp) == [
        "chassis.source=ipmitool but ipmitool is not installed (not on PATH; Debian: apt-get "
        "install ipmitool) (use chassis.source=auto to record the layer as null instead, or "
        "chassis.source=none)"
    ]
    fake_ipmitool.install(tmp_path / "bin", [fake_ipmitool.EMPTY])
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (problem,) = footprint_preflight(exp)
    assert problem.startswith(
        "chassis.source=ipmitool but ipmitool dcmi power reading answered without a power reading"
    )
    assert footprint_preflight(_exp("chassis.source=auto")) == []  # auto: null at run time

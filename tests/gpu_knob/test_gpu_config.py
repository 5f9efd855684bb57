"""The gpu section: its values, its rules, and what it leaves alone when null."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module

from llem.app.entrypoint import main
from llem.config.config_hash import config_hash
from llem.config.gpu import parse_clock
from llem.config.store import register_configs
from llem.config.validate import to_experiment


def _exp(*overrides: str):
    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        return to_experiment(compose("config", overrides=list(overrides)))


def test_null_by_default_and_a_set_limit_is_its_own_configuration() -> None:
    exp = _exp()
    assert (exp.gpu.power_limit_w, exp.gpu.sm_clock_mhz, exp.gpu.memory_clock_mhz) == (None,) * 3
    assert config_hash(exp) != config_hash(_exp("gpu.power_limit_w=300"))
    assert config_hash(_exp("gpu.power_limit_w=300")) != config_hash(_exp("gpu.power_limit_w=200"))


def test_command_line_forms_of_a_clock() -> None:
    exp = _exp("gpu.power_limit_w=250", "gpu.sm_clock_mhz=1000-1410", "gpu.memory_clock_mhz=2619")
    assert exp.gpu.power_limit_w == 250.0
    assert parse_clock(exp.gpu.sm_clock_mhz) == (1000, 1410)
    assert parse_clock(exp.gpu.memory_clock_mhz) == (2619, 2619)


@pytest.mark.parametrize(
    "override,line",
    [
        (
            "gpu.power_limit_w=200",
            "error: gpu.power_limit_w=200.0 needs a GPU but device=cpu (allowed: device=auto or "
            "device=cuda, or gpu.* null)",
        ),
        (
            "gpu.sm_clock_mhz=1410",
            "error: gpu.sm_clock_mhz=1410 needs a GPU but device=cpu (allowed: device=auto or "
            "device=cuda, or gpu.* null)",
        ),
    ],
)
def test_a_gpu_knob_on_the_cpu_is_a_configuration_error(override, line, tmp_path, capsys) -> None:
    code = main(["device=cpu", override, f"hydra.run.dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [line]


@pytest.mark.parametrize("value", ["fast", "1410-1000", "0", "1000-"])
def test_a_malformed_clock_is_one_line_naming_the_forms(value, tmp_path, capsys) -> None:
    code = main([f"gpu.sm_clock_mhz={value}", f"hydra.run.dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [
        f"error: gpu.sm_clock_mhz={value} is not a clock (allowed: MHz as a value, e.g. 1410, "
        "or a range MIN-MAX, e.g. 1000-1410)"
    ]


def test_a_negative_power_limit_names_the_range(tmp_path, capsys) -> None:
    code = main(["gpu.power_limit_w=-5", f"hydra.run.dir={tmp_path}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "gpu.power_limit_w=-5.0 is out of range (allowed: > 0)" in err

"""A run with the gpu section over the NVML test double: set before the warm-up, read back,
judged at the window's end, and restored on every way out (normal end, an exception, Ctrl-C)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from llem.measure.gpu_record import read_records
from llem.runner import Runner
from llem.runner import runner as runner_module
from llem.testing.cli import compose_tiny
from llem.testing.fake_nvml_control import FakeControl
from llem.testing.fake_pynvml import FakeGpu

SMALL = ("device=auto", "dataset.n_prompts=2", "decoder.max_new_tokens=4")


def _run(model_dir: Path, run_dir: Path, *overrides: str) -> dict:
    return Runner().run(compose_tiny(model_dir, *SMALL, *overrides), run_dir).to_json()


@pytest.mark.slow
def test_set_before_the_warm_up_recorded_and_restored(
    install_nvml, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000)
    install_nvml([gpu])
    seen_at_warm_up = []
    warm_up = runner_module.Runner._generate

    def spy(self, *args, **kwargs):
        seen_at_warm_up.append((gpu.power_limit_mw, gpu.control.sm_lock))
        return warm_up(self, *args, **kwargs)

    monkeypatch.setattr(runner_module.Runner, "_generate", spy)
    result = _run(
        tiny_model_dir, tmp_path / "run", "gpu.power_limit_w=300", "gpu.sm_clock_mhz=1410"
    )
    assert result["status"] == "ok"
    assert seen_at_warm_up == [(300_000, (1410, 1410))]
    section = result["gpu"]
    assert section["requested_power_limit_w"] == 300.0
    assert section["requested_sm_clock_mhz"] == [1410, 1410]
    device = section["devices"]["GPU-aaaa"]
    assert device["power_limit_w_before"] == 450.0
    assert device["enforced_power_limit_w"] == 300.0
    assert device["enforced_power_limit_w_window_end"] == 300.0
    assert device["sm_clock_mhz_window_end"] == 1410
    assert device["restored"] == "power limit 450 W, SM clock unlocked"
    assert section["restored"] is True
    assert result["validity"]["checks"]["gpu_settings"] == "passed"
    # put back: the previous limit (not the maximum, 700 W), the lock llem set removed
    assert gpu.power_limit_mw == 450_000 and gpu.control.sm_lock is None
    assert read_records() == []
    on_disk = json.loads((tmp_path / "run" / "result.json").read_text())
    assert on_disk["gpu"]["restored"] is True


@pytest.mark.slow
def test_a_gpu_that_does_not_hold_the_limit_is_a_validity_problem(
    install_nvml, tiny_model_dir, tmp_path
) -> None:
    gpu = FakeGpu("GPU-aaaa", control=FakeControl(enforced_cap_mw=250_000))
    install_nvml([gpu])
    result = _run(tiny_model_dir, tmp_path / "run", "gpu.power_limit_w=300")
    assert result["validity"]["checks"]["gpu_settings"] == "failed"
    assert (
        "GPU 0 enforced a power limit of 250.0 W at the window's end, not the "
        "gpu.power_limit_w=300 asked for"
    ) in result["validity"]["problems"]


@pytest.mark.slow
def test_a_run_without_the_section_leaves_the_gpu_alone(install_nvml, tiny_model_dir, tmp_path):
    gpu = FakeGpu("GPU-aaaa")
    install_nvml([gpu])
    result = _run(tiny_model_dir, tmp_path / "run")
    assert result["gpu"] is None
    assert result["null_reasons"]["gpu"].startswith("gpu.* null")
    assert gpu.control.changes == []


@pytest.mark.parametrize("raised", [RuntimeError("boom"), KeyboardInterrupt()])
def test_restored_when_the_run_fails_or_is_interrupted(
    raised, install_nvml, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000)
    install_nvml([gpu])

    def fail(self, *args, **kwargs):
        assert gpu.power_limit_mw == 300_000  # set when the failure comes
        raise raised

    monkeypatch.setattr(runner_module.Runner, "_window", fail)
    with pytest.raises(type(raised)):
        _run(tiny_model_dir, tmp_path / "run", "gpu.power_limit_w=300")
    assert gpu.power_limit_mw == 450_000
    assert read_records() == []
    on_disk = json.loads((tmp_path / "run" / "result.json").read_text())
    assert on_disk["status"] == "failed" and on_disk["gpu"]["restored"] is True


def test_a_failed_restore_says_so_loudly_and_keeps_the_record(
    install_nvml, tiny_model_dir, tmp_path, caplog
) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000, control=FakeControl(failing_restore=True))
    install_nvml([gpu])
    with caplog.at_level(logging.ERROR, logger="llem.gpu"):
        result = _run(tiny_model_dir, tmp_path / "run", "gpu.power_limit_w=300")
    assert gpu.power_limit_mw == 300_000  # still changed
    assert result["gpu"]["restored"] is False
    assert result["gpu"]["devices"]["GPU-aaaa"]["restored"] is None
    assert "setting the power limit of GPU 0 to 450 W" in result["gpu"]["restore_problems"][0]
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert line.startswith("GPU SETTINGS NOT RESTORED: setting the power limit of GPU 0 to 450 W")
    assert "python -m llem.gpu restore" in line
    (record,) = read_records()
    assert record.gpus[0].power_limit_w == 450.0


def test_a_setting_not_held_makes_measured_energy_invalid() -> None:
    from llem.result import Figure, RunResult
    from llem.runner.gpu_settings import _judge

    result = RunResult(status="ok")
    result.set_figure("validity.energy_valid", Figure(True))
    _judge(result, ["GPU 0 ran at 1200 MHz at the window's end, outside ..."])
    assert result.validity.energy_valid is False
    assert result.validity.checks["gpu_settings"] == "failed"

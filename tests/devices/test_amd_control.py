"""The power cap and clocks of an AMD GPU through amdsmi (the fake): read, set, read back and
restored, through GpuControl and through llem's GpuSettings (which opens the GPUs itself, as the
CLI does); a refused permission and a cap out of range each one clear line."""

from __future__ import annotations

import pytest

from llem.config.gpu import GPUConfig
from llem.devices.amd import init_amdsmi
from llem.devices.gpu import GpuControlError
from llem.devices.gpu_control import GpuControl
from llem.devices.gpus import open_gpus
from llem.runner.gpu_settings import GpuSettings, gpu_preflight_problems
from llem.testing.fake_amdsmi import FakeAmdGpu, FakeAmdSmi


def test_gpu_control_reads_sets_and_restores_the_cap_in_watts(clock) -> None:
    gpu = FakeAmdGpu("GPU-c", power_cap_uw=750_000_000, power_cap_range_uw=(200_000_000, 750e6))
    lib = init_amdsmi(FakeAmdSmi([gpu], clock))
    control = GpuControl(lib)
    (g,) = lib.gpus()
    before = control.state(g)
    assert (before.power_limit_w, before.power_range_w) == (750.0, (200.0, 750.0))
    assert (before.sm_clock_mhz, before.memory_clock_mhz) == (2100, 1300)
    control.set_power_limit(g, 450)
    assert gpu.power_cap_uw == 450_000_000  # amdsmi was given uW
    assert control.state(g).power_limit_w == 450.0
    control.set_power_limit(g, before.power_limit_w)
    assert gpu.power_cap_uw == 750_000_000


def test_clock_ranges_are_set_and_handed_back_to_the_driver(clock) -> None:
    gpu = FakeAmdGpu("GPU-c")
    lib = init_amdsmi(FakeAmdSmi([gpu], clock))
    control = GpuControl(lib)
    (g,) = lib.gpus()
    assert control.supported_sm_clocks(g) == [2100, 500]
    control.lock_sm_clocks(g, 1200, 1200)
    assert gpu.gfx_clk_mhz == 1200 and gpu.perf_level == 3  # manual
    control.reset_sm_clocks(g)
    assert gpu.perf_level == 0  # auto


def test_a_refused_set_is_a_permission_error(clock) -> None:
    lib = init_amdsmi(FakeAmdSmi([FakeAmdGpu("GPU-c", set_permitted=False)], clock))
    (g,) = lib.gpus()
    with pytest.raises(GpuControlError) as err:
        lib.set_power_limit_w(g, 400)
    assert err.value.kind == "permission"
    assert "AMDSMI_STATUS_NO_PERM" in err.value.detail
    problem = GpuControl(lib).permission_problem(g)
    assert problem is not None and "no permission" in problem and "\n" not in problem


def test_open_gpus_falls_through_to_amdsmi_when_nvml_cannot_start(amd_machine) -> None:
    amd_machine([FakeAmdGpu("GPU-c")])
    lib = open_gpus()
    assert (lib.vendor, lib.api) == ("amd", "amdsmi")
    assert lib.visible_devices_var == "HIP_VISIBLE_DEVICES"


def test_gpu_settings_set_the_cap_for_the_run_and_restore_it(amd_machine) -> None:
    (gpu,) = amd_machine([FakeAmdGpu("GPU-c", power_cap_uw=750_000_000)]).gpus
    cfg = GPUConfig(power_limit_w=400.0)
    assert gpu_preflight_problems(cfg, [0]) == []
    settings = GpuSettings(cfg, [0])
    settings.apply()
    assert gpu.power_cap_uw == 400_000_000
    settings.restore()
    assert gpu.power_cap_uw == 750_000_000
    assert settings.section.restored is True


def test_preflight_refused_permission_is_one_line(amd_machine) -> None:
    amd_machine([FakeAmdGpu("GPU-c", set_permitted=False)])
    (problem,) = gpu_preflight_problems(GPUConfig(power_limit_w=400.0), [0])
    assert "no permission" in problem and "AMDSMI_STATUS_NO_PERM" in problem
    assert "\n" not in problem


def test_preflight_cap_out_of_range_names_the_range(amd_machine) -> None:
    amd_machine([FakeAmdGpu("GPU-c", power_cap_range_uw=(200_000_000, 750_000_000))])
    (problem,) = gpu_preflight_problems(GPUConfig(power_limit_w=900.0), [0])
    assert problem == (
        "gpu.power_limit_w=900 is outside GPU 0's power limit range (allowed: 200 to 750 W)"
    )


def test_amdsmi_errors_become_control_errors_of_their_kind(clock) -> None:
    gpu = FakeAmdGpu("GPU-c", power_cap_range_uw=(200_000_000, 750_000_000))
    lib = init_amdsmi(FakeAmdSmi([gpu], clock))
    (g,) = lib.gpus()
    with pytest.raises(GpuControlError) as failed:
        lib.set_power_limit_w(g, 900)  # amdsmi refuses it: AMDSMI_STATUS_INVAL
    assert failed.value.kind == "failed" and "AMDSMI_STATUS_INVAL" in str(failed.value)
    gpu.gfx_clk_mhz = "N/A"  # type: ignore[assignment]
    with pytest.raises(GpuControlError) as unsupported:
        lib.clock_mhz(g, "sm")
    assert unsupported.value.kind == "not_supported"

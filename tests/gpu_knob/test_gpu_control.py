"""Reading, checking and changing a GPU's power limit and clocks through NVML (the test double)."""

from __future__ import annotations

import pynvml

from llem.devices.gpu_control import GpuControl, clock_problem, power_problem
from llem.devices.nvidia import init_nvml
from llem.testing.fake_nvml_control import FakeControl
from llem.testing.fake_pynvml import FAKED_FUNCTIONS, FakeGpu


def test_every_faked_function_is_a_real_nvml_function() -> None:
    assert "nvmlDeviceSetPowerManagementLimit" in FAKED_FUNCTIONS
    assert [f for f in FAKED_FUNCTIONS if not hasattr(pynvml, f)] == []


def test_state_is_read_in_watts_and_the_enforced_limit_follows_the_set_one(install_nvml) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=700_000, control=FakeControl(enforced_cap_mw=650_000))
    install_nvml([gpu])
    nvml = init_nvml()
    control = GpuControl(nvml)
    (g,) = nvml.gpus()
    before = control.state(g)
    assert (before.power_limit_w, before.enforced_power_limit_w) == (700.0, 650.0)
    assert before.power_range_w == (200.0, 700.0)
    control.set_power_limit(g, 300)
    after = control.state(g)
    assert (after.power_limit_w, after.enforced_power_limit_w) == (300.0, 300.0)


def test_the_read_back_waits_until_the_gpu_enforces_the_new_limit(install_nvml) -> None:
    # as on a real H100: the enforced limit read right after the change is still the old one
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=700_000, control=FakeControl(enforce_lag_reads=3))
    install_nvml([gpu])
    nvml = init_nvml()
    control = GpuControl(nvml)
    (g,) = nvml.gpus()
    control.set_power_limit(g, 300)
    assert control.state(g).enforced_power_limit_w == 300.0


def test_locked_clocks_are_what_the_gpu_runs_at_and_reset_unlocks(install_nvml) -> None:
    install_nvml()
    nvml = init_nvml()
    control = GpuControl(nvml)
    (g,) = nvml.gpus()
    control.lock_sm_clocks(g, 1000, 1410)
    control.lock_memory_clocks(g, 2619, 2619)
    assert (control.state(g).sm_clock_mhz, control.state(g).memory_clock_mhz) == (1410, 2619)
    control.reset_sm_clocks(g)
    assert control.state(g).sm_clock_mhz == 1980


def test_out_of_range_values_name_the_range_nvml_gives(install_nvml) -> None:
    install_nvml()
    nvml = init_nvml()
    control = GpuControl(nvml)
    (g,) = nvml.gpus()
    assert power_problem(control.state(g), 300) is None
    assert power_problem(control.state(g), 100) == (
        "gpu.power_limit_w=100 is outside GPU 0's power limit range (allowed: 200 to 700 W)"
    )
    supported = control.supported_sm_clocks(g)
    assert clock_problem("gpu.sm_clock_mhz", 0, (1000, 1410), supported) is None
    assert clock_problem("gpu.sm_clock_mhz", 0, (100, 3000), supported) == (
        "gpu.sm_clock_mhz=100-3000 is outside GPU 0's supported clocks (allowed: 345 to 1980 MHz;"
        " 110 values from 345 to 1980)"
    )


def test_permission_is_found_out_without_changing_anything(install_nvml) -> None:
    gpu = FakeGpu("GPU-aaaa", power_limit_mw=450_000, control=FakeControl(no_permission=True))
    install_nvml([gpu])
    nvml = init_nvml()
    (g,) = nvml.gpus()
    problem = GpuControl(nvml).permission_problem(g)
    assert problem is not None
    assert "no permission (NVMLError_NoPermission" in problem
    assert "root or CAP_SYS_ADMIN" in problem and "sudo" in problem
    assert gpu.power_limit_mw == 450_000 and gpu.control.changes == []
    allowed = FakeGpu("GPU-bbbb", power_limit_mw=450_000)
    install_nvml([allowed])
    nvml = init_nvml()
    (g,) = nvml.gpus()
    assert GpuControl(nvml).permission_problem(g) is None
    assert allowed.control.changes == [["nvmlDeviceSetPowerManagementLimit", 450_000]]
    assert allowed.control.original_limit_mw is None  # set to itself: nothing changed

"""Pre-flight checks, energy=auto/none/cpu, cooldown, report shape, close()."""

from __future__ import annotations

import dataclasses
import math

import pynvml as real_pynvml
import pytest

from llem.config.schema import EnergySource
from llem.errors import PreflightError
from llem.result import Energy, Thermal
from llem.result.figure import figure_specs
from llem.testing.fake_pynvml import FakeGpu

from .conftest import assert_nulls_explained, make_cfg

NOT_FOUND = real_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND


def test_energy_keys_are_the_design_contract():
    keys = tuple(f.name for f in dataclasses.fields(Energy))
    assert keys[:12] == (
        "source",
        "unavailable_reason",
        "window_s",
        "total_j",
        "per_device_j",
        "idle_power_w",
        "idle_adjusted_j",
        "j_per_output_token",
        "j_per_request",
        "avg_power_w",
        "peak_power_w",
        "warnings",
    )
    assert set(keys[12:15]) == {"cpu_source", "cpu_package_j", "cpu_unavailable_reason"}
    assert {"j_per_total_token", "output_tokens_per_j", "total_j_uncertainty"} < set(keys)
    specs = figure_specs(Energy)
    # every energy figure has its uncertainty bound beside it, but for these
    unbounded = {name for name, spec in specs.items() if spec.bound is None}
    assert unbounded == {
        "window_s",
        "peak_power_w",
        "per_device_peak_power_w",  # a peak sample, as peak_power_w
        "cpu_package_j",
        "idle_measured_at",
        "other_processes",
        "fit",  # the step model's coefficients with their standard errors (llem.figures)
    }
    assert all(spec.bound in keys for spec in specs.values() if spec.bound)


def test_nvml_requested_but_missing(install_nvml, make_session):
    install_nvml([], init_error=NOT_FOUND)
    s = make_session(make_cfg(energy=EnergySource.nvml))
    expected = (
        "measurement.energy=nvml but NVML is not available "
        "(NVMLError_LibraryNotFound: NVML Shared Library Not Found)"
    )
    assert s.preflight() == [expected]
    with pytest.raises(PreflightError, match="NVMLError_LibraryNotFound"):
        s.start()


def test_auto_without_nvml_is_unavailable_not_a_problem(install_nvml, make_session, clock):
    install_nvml([], init_error=NOT_FOUND)
    s = make_session(make_cfg(energy=EnergySource.auto, idle_baseline_s=5.0))
    assert s.preflight() == []
    s.start()
    assert clock.now() == 1000.0  # no idle wait when there is nothing to measure
    with s.window():
        clock.sleep(2.0)
    rep = s.measurement(output_tokens=10, requests=2)
    assert rep.energy.source == "unavailable"
    assert rep.energy.unavailable_reason == "NVML is not available (NVMLError_LibraryNotFound)"
    assert rep.energy.window_s == 2.0
    assert all(
        getattr(rep.energy, k) is None for k in ("total_j", "j_per_output_token", "peak_power_w")
    )
    assert rep.thermal == Thermal(max_temp_c=None, throttled=None, throttle_reasons=[])
    assert rep.null_reasons["thermal.max_temp_c"] == (
        "no GPU temperature readings (NVML unavailable: NVMLError_LibraryNotFound)"
    )
    assert_nulls_explained(rep)


def test_real_pynvml_without_a_driver(make_session, monkeypatch):
    """On this kind of machine (no NVML library) the real bindings give a clear reason."""
    try:
        real_pynvml.nvmlInit()
    except real_pynvml.NVMLError:
        pass
    else:
        real_pynvml.nvmlShutdown()
        pytest.skip("NVML works here")
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", real_pynvml)
    s = make_session(make_cfg(energy=EnergySource.auto))
    assert s.preflight() == []
    s.start()
    assert s.unavailable_reason.startswith("NVML is not available (NVMLError_")


def test_cpu_run(install_nvml, make_session):
    fake = install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg(energy=EnergySource.nvml), device_type="cpu", indices=None)
    assert s.preflight() == [
        "measurement.energy=nvml needs a CUDA device but the run is on device=cpu"
    ]
    s = make_session(make_cfg(energy=EnergySource.auto), device_type="cpu", indices=None)
    assert s.preflight() == []
    s.start()
    with s.window():
        pass
    rep = s.measurement(output_tokens=1, requests=1)
    assert rep.energy.source == "unavailable"
    # this machine has a GPU; the run just is not on it
    assert rep.energy.unavailable_reason == "the run is on device=cpu, not on a GPU"
    assert rep.null_reasons["thermal.max_temp_c"] == (
        "no GPU temperature readings (the run is on device=cpu)"
    )
    assert rep.energy.warnings == []  # nothing measured, so a short window is no concern
    assert fake.init_calls == fake.shutdown_calls == 1  # asked whether NVML is there; left closed
    assert rep.devices == ()


GPU_FIELDS = (
    "thermal.max_temp_c",
    "thermal.throttled",
    "thermal.power_capped_fraction",
    "thermal.temp_rise_c",
)


def test_cpu_run_on_a_machine_without_nvml(install_nvml, make_session):
    """The energy reason says once, shortly, why; each thermal and memory null reason is about
    its own field (no 'no GPU energy to measure' on a temperature)."""
    install_nvml([], init_error=NOT_FOUND)
    s = make_session(make_cfg(energy=EnergySource.auto), device_type="cpu", indices=None)
    s.start()
    with s.window():
        pass
    rep = s.measurement(output_tokens=1, requests=1)
    assert rep.energy.unavailable_reason == "no NVIDIA GPU/NVML (NVMLError_LibraryNotFound)"
    reasons = dict(rep.null_reasons)
    assert reasons["thermal.max_temp_c"] == (
        "no GPU temperature readings (NVML unavailable: NVMLError_LibraryNotFound)"
    )
    assert reasons["thermal.throttled"] == (
        "no GPU clock throttle readings (NVML unavailable: NVMLError_LibraryNotFound)"
    )
    assert rep.peak_device_used_mb.null_reason == (
        "no GPU memory readings (NVML unavailable: NVMLError_LibraryNotFound)"
    )
    for key in GPU_FIELDS:
        assert "energy" not in reasons[key].lower(), (key, reasons[key])
    assert "energy" not in (rep.peak_device_used_mb.null_reason or "").lower()
    assert_nulls_explained(rep)


def test_energy_none_says_gpu_readings_are_off(install_nvml, make_session):
    install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg(energy=EnergySource.none))
    s.start()
    with s.window():
        pass
    rep = s.measurement(output_tokens=1, requests=1)
    assert rep.null_reasons["thermal.max_temp_c"] == (
        "no GPU temperature readings (measurement.energy=none turns GPU sampling off)"
    )


@pytest.mark.parametrize(
    "overrides, problem",
    [
        ({"sample_hz": 0.0}, "measurement.sample_hz=0.0: must be > 0 and <= 1000"),
        ({"cooldown_s": -1.0}, "measurement.cooldown_s=-1.0: must be >= 0"),
        (
            {"replay_trace": "/t.csv", "energy": EnergySource.auto},
            "measurement.replay_trace=/t.csv is set but measurement.energy=auto; "
            "set measurement.energy=replay to use it",
        ),
    ],
)
def test_config_problems(install_nvml, make_session, overrides, problem):
    install_nvml([FakeGpu("GPU-a")])
    assert make_session(make_cfg(**overrides)).preflight() == [problem]


def test_preflight_leaves_nvml_closed(install_nvml, make_session):
    fake = install_nvml([FakeGpu("GPU-a")])
    assert make_session(make_cfg()).preflight() == []
    assert fake.init_calls == fake.shutdown_calls == 1


def test_close_is_idempotent(install_nvml, make_session):
    fake = install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg())
    s.start()
    s.close()
    s.close()
    assert fake.shutdown_calls == 1


def cooling(t: float) -> float:
    """40 C while idle (the first second), then 80 C cooling towards 40 C (time constant 1 s)."""
    return 40.0 if t <= 1001.0 else 40.0 + 40.0 * math.exp(-(t - 1001.0))


def test_cooldown_waits_for_temperature(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a", temperature_c=cooling)])
    s = make_session(make_cfg(idle_baseline_s=1.0, cooldown_s=10.0, cooldown_temp_margin_c=5.0))
    s.start()
    assert s.idle.temperature_c == {"GPU-a": 40.0}
    clock.sleep(0.5)  # model load and warm-up
    info = s.cooldown()
    # 40 * exp(-x) <= 5.5 (the fake rounds to whole degrees) from x = 1.98 s; polled every 0.5 s
    assert info["cooldown_waited_s"] == pytest.approx(1.5)
    assert info["start_temp_c"] == 45.0


def test_cooldown_is_bounded_by_cooldown_s(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a", temperature_c=cooling)])
    s = make_session(make_cfg(idle_baseline_s=1.0, cooldown_s=1.0, cooldown_temp_margin_c=2.0))
    s.start()
    clock.sleep(0.5)
    info = s.cooldown()
    assert info["cooldown_waited_s"] == pytest.approx(1.0)
    assert info["start_temp_c"] == 49.0
    with s.window():
        clock.sleep(1.0)
    warnings = s.measurement(output_tokens=1, requests=1).energy.warnings
    assert any("cooldown stopped at measurement.cooldown_s=1.0" in w for w in warnings)


def test_plain_cooldown(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a", temperature_c=61.0)])
    s = make_session(make_cfg(cooldown_s=3.0))
    s.start()
    assert s.cooldown() == {"cooldown_waited_s": 3.0, "start_temp_c": 61.0}
    s_none = make_session(make_cfg(cooldown_s=0.0, energy=EnergySource.none))
    s_none.start()
    assert s_none.cooldown() == {"cooldown_waited_s": 0.0, "start_temp_c": None}


def test_the_windows_start_is_stamped_on_the_wall_clock_at_its_start_edge(
    install_nvml, make_session
):
    """The instant an ElectricityMaps zone's hour is taken from: the start edge, not the end."""
    import time
    from datetime import datetime, timezone

    install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg(energy=EnergySource.auto), device_type="cpu", indices=None)
    s.start()
    assert s.last_window_start_utc() is None
    before = datetime.now(timezone.utc)
    with s.window():
        inside = datetime.now(timezone.utc)
        time.sleep(0.01)
    started = s.last_window_start_utc()
    assert started is not None and before <= started <= inside

"""One NVML hiccup in a secondary reading must not void the energy (issue 9, item 7); a failure of
the energy figure's own reading still does."""

from __future__ import annotations

import pytest

from llem.testing.fake_pynvml import Constant, FakeGpu

from .conftest import assert_nulls_explained, make_cfg

PASCAL = 4
SECONDARY = [
    ("nvmlDeviceGetUtilizationRates", "gpu_util_pct"),
    ("nvmlDeviceGetClockInfo", "sm_clock_mhz"),
    ("clock_event_reasons", "throttle_reasons"),
    ("nvmlDeviceGetMemoryInfo", "memory_used_mb"),
    ("nvmlDeviceGetTemperature", "temperature_c"),
    ("nvmlDeviceGetFieldValues", "power_w"),  # power is secondary where a counter exists
]


def measure(make_session, clock, gpu: FakeGpu, install_nvml, tmp_path):
    install_nvml([gpu])
    s = make_session(make_cfg(sample_hz=10.0))
    s.start()
    with s.window():
        clock.sleep(2.0)
    rep = s.measurement(output_tokens=100, requests=2)
    return rep, s.last_window.samples


@pytest.mark.parametrize("function, column", SECONDARY)
def test_secondary_reading_failure_nulls_its_column_only(
    install_nvml, make_session, clock, tmp_path, function, column
):
    # set-up probes each function once; calls 5 to 7 (inside the window) fail
    gpu = FakeGpu("GPU-a", power=Constant(200.0), failing_calls={function: {5, 6, 7}})
    rep, samples = measure(make_session, clock, gpu, install_nvml, tmp_path)
    e = rep.energy
    assert e.source == "nvml_counter"
    assert e.total_j == pytest.approx(400.0, abs=1e-2)  # today: unavailable
    assert rep.validity.checks["energy_nonzero"] == "passed"
    empty = [x for x in samples if getattr(x, column) is None]
    assert 1 <= len(empty) <= 3 and len(samples) > len(empty)
    [warning] = [w for w in e.warnings if "NVML failed to read" in w]
    assert "GPU-a: NVML failed to read" in warning
    assert "NVMLError_Unknown" in warning and "energy is unaffected" in warning
    assert_nulls_explained(rep)


def test_a_column_that_always_fails_is_null_with_a_reason(
    install_nvml, make_session, clock, tmp_path
):
    gpu = FakeGpu("GPU-a", failing_calls={"nvmlDeviceGetTemperature": set()})
    install_nvml([gpu])
    s = make_session(make_cfg())
    s.start()
    with s.window():
        clock.sleep(1.0)
    rep = s.measurement(output_tokens=1, requests=1)
    assert rep.energy.total_j == pytest.approx(100.0, abs=1e-2)
    assert rep.thermal.max_temp_c is None
    assert rep.null_reasons["thermal.max_temp_c"] == "no temperature readings"
    assert rep.validity.checks["temperature_steady"] == "not checked"


def test_counter_failure_still_voids_energy(install_nvml, make_session, clock, tmp_path):
    # set-up reads the counter once; the window's start read is call 2, its end read call 3
    gpu = FakeGpu("GPU-a", failing_calls={"nvmlDeviceGetTotalEnergyConsumption": {3}})
    rep, _ = measure(make_session, clock, gpu, install_nvml, tmp_path)
    assert rep.energy.source == "unavailable"
    assert "NVMLError_Unknown" in rep.energy.unavailable_reason
    assert rep.validity.energy_valid is None


def test_power_failure_voids_energy_without_a_counter(install_nvml, make_session, clock, tmp_path):
    gpu = FakeGpu("GPU-p", architecture=PASCAL, failing_calls={"nvmlDeviceGetFieldValues": {8}})
    rep, _ = measure(make_session, clock, gpu, install_nvml, tmp_path)
    assert rep.energy.source == "unavailable"
    assert "NVMLError_Unknown" in rep.energy.unavailable_reason

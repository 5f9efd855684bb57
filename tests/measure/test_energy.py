"""Energy over a window: NVML counter deltas, integrated power, idle subtraction, warnings."""

from __future__ import annotations

import pytest

from llem.config.schema import EnergySource
from llem.testing.fake_pynvml import Constant, FakeGpu, Ramp, Square, Step

from .conftest import assert_nulls_explained, make_cfg

T0 = 1000.0  # the virtual clock's start
PASCAL = 4


def measure(make_session, clock, gpus_power, window_s, *, lead_in_s=0.123, **cfg):
    """Start a session, wait ``lead_in_s``, measure a ``window_s`` window; return (report, a, b)."""
    s = make_session(make_cfg(**cfg), indices=range(len(gpus_power)))
    s.start()
    clock.sleep(lead_in_s)
    a = clock.now()
    with s.window() as w:
        clock.sleep(window_s)
        assert w.elapsed_s() == pytest.approx(window_s)
    b = clock.now()
    return s.measurement(output_tokens=1000, requests=8), a, b


def waveforms(a):
    """Step, square and ramp traces whose features fall inside a window starting at ``a``."""
    return {
        "step": Step(100.0, 250.0, at_s=a + 1.234),
        "square": Square(100.0, 300.0, period_s=2.0, phase_s=a + 0.317),
        "ramp": Ramp(80.0, 320.0, t0=a + 0.4, t1=a + 2.6),
    }


@pytest.mark.parametrize("kind", ["step", "square", "ramp"])
def test_counter_delta_matches_analytic_energy(install_nvml, make_session, clock, kind):
    wave = waveforms(T0 + 0.123)[kind]
    install_nvml([FakeGpu("GPU-a", power=wave), FakeGpu("GPU-b", power=Constant(50.0))])
    rep, a, b = measure(make_session, clock, [wave, None], 3.0)
    e = rep.energy
    assert e.source == "nvml_counter"
    assert e.window_s == pytest.approx(3.0)
    assert e.per_device_j["GPU-a"] == pytest.approx(wave.energy(a, b), rel=5e-3, abs=2e-3)
    assert e.per_device_j["GPU-b"] == pytest.approx(150.0, abs=2e-3)
    total = wave.energy(a, b) + 150.0
    assert e.total_j == pytest.approx(total, rel=5e-3)
    assert e.j_per_output_token == pytest.approx(e.total_j / 1000)
    assert e.j_per_request == pytest.approx(e.total_j / 8)
    assert e.avg_power_w == pytest.approx(e.total_j / 3.0)
    assert e.warnings == []
    assert_nulls_explained(rep)


@pytest.mark.parametrize("kind", ["step", "square", "ramp"])
def test_integrated_power_without_counter(install_nvml, make_session, clock, kind):
    """Pre-Volta: no counter, so sampled instantaneous power is integrated (edges included)."""
    wave = waveforms(T0 + 0.123)[kind]
    install_nvml([FakeGpu("GPU-p", architecture=PASCAL, power=wave)])
    rep, a, b = measure(make_session, clock, [wave], 3.0, sample_hz=100.0)
    assert rep.energy.source == "nvml_power"
    assert rep.energy.total_j == pytest.approx(wave.energy(a, b), rel=5e-3)
    assert rep.energy.peak_power_w == pytest.approx(
        max(wave.power(a + k * 0.01) for k in range(301)), abs=1e-3
    )


def test_integration_error_stays_within_its_bound_at_10_hz(install_nvml, make_session, clock):
    """Documented bound: at most dP / (2 * sample_hz) joules per step change of the draw."""
    wave = Square(100.0, 300.0, period_s=0.77, phase_s=T0 + 0.2)
    install_nvml([FakeGpu("GPU-p", architecture=PASCAL, power=wave)])
    rep, a, b = measure(make_session, clock, [wave], 3.0, sample_hz=10.0)
    edges = int(3.0 / 0.385) + 1
    bound = edges * 200.0 / (2 * 10.0)
    assert abs(rep.energy.total_j - wave.energy(a, b)) <= bound


def test_ramp_is_exact_even_at_low_rate(install_nvml, make_session, clock):
    wave = Ramp(50.0, 350.0, t0=T0, t1=T0 + 10.0)  # linear throughout the window
    install_nvml([FakeGpu("GPU-p", architecture=PASCAL, power=wave)])
    rep, a, b = measure(make_session, clock, [wave], 2.5, sample_hz=2.0)
    assert rep.energy.total_j == pytest.approx(wave.energy(a, b), rel=1e-4)


def test_average_power_fallback_warns(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-p", architecture=PASCAL, instant_power=False)])
    rep, _, _ = measure(make_session, clock, [None], 2.0)
    assert rep.energy.source == "nvml_power"
    assert rep.energy.total_j == pytest.approx(200.0, rel=1e-3)
    assert any("nvmlDeviceGetPowerUsage" in w for w in rep.energy.warnings)


def test_mixed_devices_label_nvml_power(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-new"), FakeGpu("GPU-old", architecture=PASCAL)])
    rep, _, _ = measure(make_session, clock, [None, None], 2.0)
    assert rep.energy.source == "nvml_power"
    assert rep.energy.per_device_j == pytest.approx({"GPU-new": 200.0, "GPU-old": 200.0})


def test_short_window_is_invalid(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a")])
    rep, _, _ = measure(make_session, clock, [None], 0.5, min_valid_window_s=2.0)
    assert rep.energy.total_j == pytest.approx(50.0, abs=2e-3)
    assert rep.validity.energy_valid is False
    assert rep.validity.checks["window_length"] == "failed"
    [problem] = rep.validity.problems
    assert "lasted 0.50 s, shorter than measurement.min_valid_window_s=2 s" in problem


def test_zero_joules_is_a_warning_not_a_figure(install_nvml, make_session, clock):
    """A counter that did not advance (window inside one update period) gives no figures."""
    install_nvml([FakeGpu("GPU-a", counter_update_s=1.0)])
    rep, _, _ = measure(make_session, clock, [None], 0.3, min_window_s=0.1, lead_in_s=0.1)
    e = rep.energy
    assert e.source == "nvml_counter"
    assert e.total_j is None and e.per_device_j == {"GPU-a": None}
    assert e.j_per_output_token is None and e.avg_power_w is None
    assert (
        "0 J" in rep.null_reasons["energy.j_per_output_token"]
        or "0.000 J" in rep.null_reasons["energy.j_per_output_token"]
    )
    assert any("did not advance" in w for w in e.warnings)
    assert rep.validity.energy_valid is False
    assert rep.validity.checks["energy_nonzero"] == "failed"
    assert any("read 0.000 J" in p for p in rep.validity.problems)
    assert_nulls_explained(rep)


@pytest.mark.parametrize("arch", [9, PASCAL])
def test_idle_power_is_subtracted(install_nvml, make_session, clock, arch):
    # 60 W while idle (session.start() measures 2 s of it), 250 W once the window starts.
    install_nvml(
        [
            FakeGpu(f"GPU-{i}", architecture=arch, power=Step(60.0, 250.0, T0 + 2.0))
            for i in range(2)
        ]
    )
    rep, a, b = measure(
        make_session, clock, [None, None], 3.0, idle_baseline_s=2.0, lead_in_s=0.0, sample_hz=20.0
    )
    e = rep.energy
    assert e.idle_power_w == pytest.approx(120.0, rel=1e-3)
    assert e.total_j == pytest.approx(1500.0, rel=1e-3)
    assert e.idle_adjusted_j == pytest.approx(1500.0 - 120.0 * 3.0, rel=1e-3)


def test_idle_baseline_zero_leaves_idle_null_with_reason(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a")])
    rep, _, _ = measure(make_session, clock, [None], 2.0, idle_baseline_s=0.0)
    assert rep.energy.idle_power_w is None and rep.energy.idle_adjusted_j is None
    assert "idle_baseline_s=0" in rep.null_reasons["energy.idle_power_w"]
    assert_nulls_explained(rep)


def test_energy_none_disables_everything(install_nvml, make_session, clock):
    fake = install_nvml([FakeGpu("GPU-a")])
    rep, _, _ = measure(make_session, clock, [None], 2.0, energy=EnergySource.none)
    assert rep.energy.source == "unavailable"
    assert rep.energy.unavailable_reason == "disabled by measurement.energy=none"
    assert rep.energy.cpu_source == "unavailable"
    assert rep.energy.window_s == pytest.approx(2.0)
    assert fake.init_calls == 0
    assert_nulls_explained(rep)


def test_device_without_counter_or_power_is_unavailable(install_nvml, make_session, clock):
    fake = install_nvml([FakeGpu("GPU-a", architecture=PASCAL, instant_power=False)])
    fake.nvmlDeviceGetPowerUsage = _not_supported  # type: ignore[method-assign]
    rep, _, _ = measure(make_session, clock, [None], 2.0)
    assert rep.energy.source == "unavailable"
    assert "neither" in rep.energy.unavailable_reason or "no measured device" in (
        rep.energy.unavailable_reason
    )
    assert rep.thermal.max_temp_c == 40.0  # temperature is still sampled
    assert_nulls_explained(rep)


def _not_supported(handle):
    import pynvml

    raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

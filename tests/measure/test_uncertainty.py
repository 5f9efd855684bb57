"""Every energy figure carries a bound from its source, propagated to the derived figures."""

from __future__ import annotations

import pytest

from llem.config.schema import EnergySource
from llem.measure import uncertainty
from llem.testing.fake_pynvml import Constant, FakeGpu, Square, Step

from .conftest import make_cfg

T0 = 1000.0
PASCAL = 4


def measure(install_nvml, make_session, clock, gpus, window_s=5.0, **cfg):
    install_nvml(gpus)
    s = make_session(make_cfg(**cfg), indices=range(len(gpus)))
    s.start()
    with s.window():
        clock.sleep(window_s)
    return s.measurement(output_tokens=400, requests=8, input_tokens=600).energy


def test_counter_bound_is_resolution_and_update_period_at_both_edges(
    install_nvml, make_session, clock
):
    e = measure(
        install_nvml,
        make_session,
        clock,
        [FakeGpu("GPU-a", power=Step(100.0, 300.0, T0 + 2.5)), FakeGpu("GPU-b")],
    )
    # GPU-a: 100 W at the start edge, 300 W at the end: 2 mJ + 0.1 s x 400 W, plus the sensor's
    # 5 % of 1000 J; GPU-b: 2 mJ + 20 J + max(5 % of 500 J, 5 W x 5 s)
    assert e.per_device_j_uncertainty == pytest.approx({"GPU-a": 90.002, "GPU-b": 45.002})
    assert e.total_j_uncertainty == pytest.approx(135.004)
    assert e.uncertainty_components == pytest.approx(
        {
            "counter_resolution_j": 0.004,
            "counter_update_j": 60.0,
            "sensor_accuracy_j": 75.0,
        }
    )
    assert sum(e.uncertainty_components.values()) == pytest.approx(e.total_j_uncertainty)
    assert e.uncertainty_method.startswith("energy counter: 2 x 1 mJ resolution")
    assert "sensor accuracy max(5% x energy, 5 W x window_s)" in e.uncertainty_method


def test_the_counter_bound_holds_for_a_lagging_counter(install_nvml, make_session, clock):
    """A counter that refreshes every 100 ms is off by less than its bound."""
    for phase in (0.01, 0.05, 0.09):
        wave = Square(100.0, 300.0, period_s=0.37, phase_s=T0 + phase)
        gpu = FakeGpu("GPU-a", power=wave, counter_update_s=0.1)
        install_nvml([gpu])
        s = make_session(make_cfg())
        s.start()
        clock.sleep(phase)
        a = clock.now()
        with s.window():
            clock.sleep(3.0)
        e = s.measurement(output_tokens=1, requests=1).energy
        assert abs(e.total_j - wave.energy(a, clock.now())) <= e.total_j_uncertainty


def test_trapezoid_bound_covers_its_error(install_nvml, make_session, clock):
    wave = Square(100.0, 300.0, period_s=0.77, phase_s=T0 + 0.2)
    install_nvml([FakeGpu("GPU-p", architecture=PASCAL, power=wave)])
    s = make_session(make_cfg(sample_hz=10.0))
    s.start()
    a = clock.now()
    with s.window():
        clock.sleep(3.0)
    e = s.measurement(output_tokens=1, requests=1).energy
    error = abs(e.total_j - wave.energy(a, clock.now()))
    assert 0 < error <= e.total_j_uncertainty
    # each of the 8 step changes of 200 W falls inside one 0.1 s sample interval: 8 x 200 / 20;
    # instantaneous readings: no averaging lag; the sensor: 5 W x 3 s (5 % of ~600 J is less)
    parts = e.uncertainty_components
    assert parts["trapezoid_j"] == pytest.approx(8 * 200.0 / (2 * 10.0))
    assert parts["averaging_lag_j"] == 0.0
    assert parts["sensor_accuracy_j"] == pytest.approx(max(0.05 * e.total_j, 15.0))
    assert e.total_j_uncertainty == pytest.approx(sum(parts.values()))
    assert e.uncertainty_method.startswith("trapezoid integral")


def test_constant_power_has_no_trapezoid_error(install_nvml, make_session, clock):
    e = measure(
        install_nvml,
        make_session,
        clock,
        [FakeGpu("GPU-p", architecture=PASCAL, power=Constant(90.0))],
    )
    assert e.uncertainty_components["trapezoid_j"] == 0.0
    assert e.total_j_uncertainty == pytest.approx(5.0 * 5.0)  # the sensor: 5 W x 5 s > 5 % of 450 J


def test_averaged_power_bound_covers_the_lag_of_the_moving_average(
    install_nvml, make_session, clock
):
    """No counter and no instantaneous field: power comes from nvmlDeviceGetPowerUsage, a
    trailing 1 s mean. A step from 100 W to 330 W inside the window makes the integral of the
    averaged readings 115 J short (half a second of the 230 W step), ten times the trapezoid
    bound (11.5 J) that was all the bound covered; the new bound holds it."""
    wave = Step(100.0, 330.0, T0 + 2.5)
    gpu = FakeGpu("GPU-v", architecture=PASCAL, power=wave, instant_power=False)
    install_nvml([gpu])
    s = make_session(make_cfg(sample_hz=10.0))
    s.start()
    a = clock.now()
    with s.window():
        clock.sleep(5.0)
    e = s.measurement(output_tokens=1, requests=1).energy
    true_j = wave.energy(a, clock.now())
    error = abs(e.total_j - true_j)
    assert error == pytest.approx(115.0, abs=1.0)
    assert error <= e.total_j_uncertainty  # today: 115 J against a claimed 11.5 J
    parts = e.uncertainty_components
    assert parts["trapezoid_j"] == pytest.approx(11.5, abs=0.1)  # the old bound: 10x too small
    assert parts["averaging_lag_j"] == pytest.approx(330.0)  # 1 s x the last (largest) reading
    assert e.total_j_uncertainty == pytest.approx(sum(parts.values()))
    assert "averaging lag 1 s" in e.uncertainty_method


def test_propagation_and_new_figures(install_nvml, make_session, clock):
    e = measure(
        install_nvml,
        make_session,
        clock,
        [FakeGpu("GPU-a", power=Constant(200.0))],
        idle_baseline_s=2.0,
    )
    total, u = e.total_j, e.total_j_uncertainty
    assert total == pytest.approx(1000.0) and u == pytest.approx(40.002 + 50.0)
    assert e.j_per_output_token == pytest.approx(total / 400)
    assert e.j_per_output_token_uncertainty == pytest.approx(u / 400)
    assert e.j_per_total_token == pytest.approx(total / 1000)  # 600 input + 400 output tokens
    assert e.j_per_total_token_uncertainty == pytest.approx(u / 1000)
    assert e.j_per_request_uncertainty == pytest.approx(u / 8)
    assert e.avg_power_w_uncertainty == pytest.approx(u / 5.0)
    assert e.output_tokens_per_j == pytest.approx(400 / total)
    assert e.output_tokens_per_j_uncertainty == pytest.approx(400 / (total - u) - 400 / total)
    # idle: 2 s at 200 W, bound 40.002 J + 5 % of 400 J over 2 s
    assert e.idle_power_w_uncertainty == pytest.approx(60.002 / 2.0)
    assert e.idle_adjusted_j_uncertainty == pytest.approx(u + 60.002 / 2.0 * 5.0)


def test_replay_bound_is_rounding_only(make_session, clock, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("time_s,device,power_w\n0,dev0,100\n3,dev0,300\n100,dev0,300\n")
    s = make_session(
        make_cfg(energy=EnergySource.replay, replay_trace=str(trace)),
        device_type="cpu",
        indices=None,
    )
    s.start()
    with s.window():
        clock.sleep(5.0)
    e = s.measurement(output_tokens=100, requests=1).energy
    assert e.total_j_uncertainty == pytest.approx(e.total_j * uncertainty.REPLAY_RELATIVE_BOUND)
    assert list(e.uncertainty_components) == ["float_rounding_j"]
    assert e.uncertainty_method.startswith("exact integral of the trace")


def test_unavailable_energy_has_no_bound_and_says_why(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg(energy=EnergySource.none))
    s.start()
    with s.window():
        clock.sleep(1.0)
    rep = s.measurement(output_tokens=1, requests=1)
    assert rep.energy.total_j_uncertainty is None
    assert rep.null_reasons["energy.total_j_uncertainty"] == "disabled by measurement.energy=none"
    assert rep.null_reasons["energy.output_tokens_per_j"] == "disabled by measurement.energy=none"


def test_inverse_ratio_bound_edges():
    assert uncertainty.inverse_ratio_bound(10, 5.0, 5.0) is None
    assert uncertainty.inverse_ratio_bound(10, None, 1.0) is None
    assert uncertainty.inverse_ratio_bound(10, 10.0, 0.0) == 0.0


def test_a_gpu_bound_is_made_of_its_own_vendor_figures() -> None:
    """The counter and sensor terms come from the GPU's SensorSpec, not from NVML's constants:
    a planted 15.3 uJ counter refreshed every 1 ms with a 2 % / 3 W sensor."""
    from llem.devices.gpu import SensorSpec

    spec = SensorSpec(15.3e-6, 0.001, 0.02, 3.0, 0.0, "planted", "")
    parts = uncertainty.counter_components(spec, 200.0, 300.0, energy_j=1000.0, window_s=4.0)
    assert parts["counter_resolution_j"] == pytest.approx(2 * 15.3e-6)
    assert parts["counter_update_j"] == pytest.approx(0.001 * 500.0)
    assert parts["sensor_accuracy_j"] == pytest.approx(max(0.02 * 1000.0, 3.0 * 4.0))
    text = uncertainty.method_text("amdsmi_counter", spec)
    assert "0.0153 mJ resolution" in text and "1 ms update period" in text and "(planted)" in text

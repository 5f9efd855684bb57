"""Energy between two instants of the measured window (llem.measure.interval), against the exact
integral of planted power."""

from __future__ import annotations

import pytest

from llem.config.schema import EnergySource
from llem.devices.gpu import SensorSpec
from llem.devices.nvidia_reader import nvml_sensor
from llem.measure.interval import interval_energy
from llem.testing.fake_pynvml import FakeGpu, Ramp, Step

from .conftest import make_cfg

PASCAL = 4  # no energy counter: integrated power


def _window(make_session, clock, seconds, **cfg):
    s = make_session(make_cfg(**cfg))
    s.start()
    clock.sleep(0.1)
    with s.window():
        clock.sleep(seconds)
    return s


def _between(s, t0, t1):
    return interval_energy(
        s.last_window, t0, t1, source=s.source, unavailable_reason=s.unavailable_reason
    )


def test_counter_sub_interval_is_the_exact_integral_within_its_bound(
    install_nvml, make_session, clock
):
    a = clock.now() + 0.1  # the window's start
    wave = Ramp(80.0, 320.0, t0=a + 0.5, t1=a + 3.5)
    install_nvml([FakeGpu("GPU-a", power=wave)])
    s = _window(make_session, clock, 4.0, sample_hz=20.0)
    t0, t1 = a + 1.0, a + 3.0
    got = _between(s, t0, t1)
    exact = wave.energy(t0, t1)  # (120 + 280) / 2 x 2 s = 400 J
    assert exact == pytest.approx(400.0)
    assert got.value == pytest.approx(exact, rel=1e-6)  # linear inside: the samples are exact
    assert got.bound is not None and abs(got.value - exact) <= got.bound
    # the sub-intervals of a window add up to the counter's delta
    w = s.last_window
    halves = _between(s, w.start_s, t0).value + _between(s, t0, w.end_s).value
    assert halves == pytest.approx(w.devices[0].energy_j, rel=1e-9)


def test_counter_scales_the_sampled_shape_to_the_counter(install_nvml, make_session, clock):
    # a step between samples: the trapezoid misplaces energy near the step, the counter total
    # holds it right; far from the step, the scaled estimate is within its bound
    a = clock.now() + 0.1
    wave = Step(100.0, 300.0, at_s=a + 2.05)
    install_nvml([FakeGpu("GPU-a", power=wave)])
    s = _window(make_session, clock, 4.0, sample_hz=10.0)
    got = _between(s, a + 2.5, a + 3.5)
    assert got.bound is not None and abs(got.value - 300.0) <= got.bound
    assert got.value == pytest.approx(300.0, rel=0.01)


def test_integrated_power_without_a_counter(install_nvml, make_session, clock):
    a = clock.now() + 0.1
    wave = Ramp(100.0, 200.0, t0=a, t1=a + 2.0)
    install_nvml([FakeGpu("GPU-p", architecture=PASCAL, power=wave)])
    s = _window(make_session, clock, 2.0, sample_hz=10.0)
    got = _between(s, a + 0.5, a + 1.5)
    assert got.value == pytest.approx(150.0, rel=1e-6)  # (125 + 175) / 2 x 1 s
    assert got.bound is not None and got.bound >= 5.0  # sensor: 5 W x 1 s at least


def test_replay_integrates_the_trace_exactly(tmp_path, make_session, clock):
    trace = tmp_path / "trace.csv"
    trace.write_text("time_s,device,power_w\n0,g,100\n2,g,100\n2,g,300\n10,g,300\n")
    s = make_session(make_cfg(energy=EnergySource.replay, replay_trace=str(trace)), indices=None)
    s.start()  # trace time 0
    with s.window():  # trace time [0, 5]
        clock.sleep(5.0)
    origin = s.origin_s
    got = _between(s, origin + 1.0, origin + 3.0)  # 100 W x 1 s + 300 W x 1 s
    assert got.value == pytest.approx(400.0, rel=1e-12)
    assert got.bound == pytest.approx(400.0 * 1e-9)


def test_no_energy_source_or_a_span_outside_the_window_is_null_with_the_reason(
    install_nvml, make_session, clock
):
    s = _window(make_session, clock, 1.0, energy=EnergySource.none)
    w = s.last_window
    got = _between(s, w.start_s, w.end_s)
    assert got.value is None and got.null_reason.startswith("energy unavailable")
    install_nvml([FakeGpu("GPU-a")])
    s = _window(make_session, clock, 1.0)
    w = s.last_window
    out = _between(s, w.start_s - 1.0, w.end_s)
    assert out.value is None and "not a span inside the measured window" in out.null_reason
    assert interval_energy(None, 0, 1, source=None).null_reason == "no measured window"


class _Source:
    """Just what interval_energy asks of a non-replay source."""

    def sensor(self, uuid: str) -> SensorSpec:
        return nvml_sensor(1.0)


def test_the_sampled_shape_is_scaled_so_the_window_adds_up_to_the_counter() -> None:
    from llem.devices.readings import Sample
    from llem.measure.meter import DeviceEnergy, WindowResult

    # samples: 100 W flat over [0, 4] (400 J), but the counter says 440 J: every sub-interval
    # is scaled by 1.1, so [1, 2] gives 110 J, not the samples' 100 J
    ticks = tuple((t, (Sample(t, "g", power_w=100.0),)) for t in (0.0, 1.0, 2.0, 3.0, 4.0))
    parts = {"counter_resolution_j": 0.002, "counter_update_j": 20.0, "sensor_accuracy_j": 22.0}
    window = WindowResult(
        start_s=0.0,
        end_s=4.0,
        window_s=4.0,
        devices=(DeviceEnergy("g", "nvml_counter", 440.0, None, 42.002, parts),),
        ticks=ticks,
        warnings=(),
        failure=None,
        cpu_package_j=None,
        cpu_null_reason=None,
    )
    got = interval_energy(window, 1.0, 2.0, source=_Source())
    assert got.value == pytest.approx(110.0)
    # bound: flat power (no trapezoid error) + averaging lag 1 s x 100 W x 1.1 + the counter's
    # own 20.002 J in this interval's quarter share + the sensor's max(5 % x 110, 5 W x 1 s)
    assert got.bound == pytest.approx(110.0 + 20.002 / 4 + 5.5)

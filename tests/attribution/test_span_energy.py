"""Energy of consecutive spans of a window (llem.measure.span_energy): a replayed trace exactly,
a counter-scaled timeline adding up to the counter, and a bound that grows with the timeline's
resolution."""

from __future__ import annotations

import pytest

from llem.config.schema import EnergySource
from llem.devices.gpu import SensorSpec
from llem.devices.nvidia_reader import nvml_sensor
from llem.devices.readings import Sample
from llem.measure.meter import DeviceEnergy, WindowResult
from llem.measure.span_energy import span_energies
from tests.measure.conftest import make_cfg


def test_a_replayed_constant_trace_gives_every_step_power_times_duration(
    tmp_path, make_session, clock
):
    trace = tmp_path / "trace.csv"
    trace.write_text("time_s,device,power_w\n0,g,250\n100,g,250\n")
    s = make_session(make_cfg(energy=EnergySource.replay, replay_trace=str(trace)), indices=None)
    s.start()
    with s.window():
        clock.sleep(2.0)
    w = s.last_window
    edges = [w.start_s, w.start_s + 0.013, w.start_s + 0.05, w.start_s + 0.0501, w.end_s]
    got = span_energies(w, edges, source=s.source)
    assert not isinstance(got, str)
    for (a, b), joules, bound in zip(
        zip(edges, edges[1:], strict=False), got.energy_j, got.bound_j, strict=False
    ):
        assert joules == pytest.approx(250.0 * (b - a), rel=1e-9, abs=1e-9)
        assert bound <= 1e-9 * 250.0 * 2.0  # float rounding only
    assert sum(got.energy_j) == pytest.approx(w.devices[0].energy_j, rel=1e-12)


def _window(period_s: float, counter_j: float) -> WindowResult:
    """100 W before t=2 s and 300 W after, sampled every ``period_s`` over [0, 4]."""
    n = round(4.0 / period_s)
    times = [i * period_s for i in range(n + 1)]
    ticks = tuple((t, (Sample(t, "g", power_w=100.0 if t < 2.0 else 300.0),)) for t in times)
    parts = {"counter_resolution_j": 0.002, "counter_update_j": 40.0, "sensor_accuracy_j": 40.0}
    return WindowResult(
        start_s=0.0,
        end_s=4.0,
        window_s=4.0,
        devices=(DeviceEnergy("g", "nvml_counter", counter_j, None, 80.002, parts),),
        ticks=ticks,
        warnings=(),
        failure=None,
        cpu_package_j=None,
        cpu_null_reason=None,
    )


class _Instant:
    def sensor(self, uuid: str) -> SensorSpec:
        return nvml_sensor(0.0)


def test_spans_add_up_to_the_counter_and_the_bound_grows_with_the_sample_interval() -> None:
    edges = [0.0, 1.9, 1.95, 2.0, 2.05, 4.0]
    fine = span_energies(_window(0.01, 800.0), edges, source=_Instant())
    coarse = span_energies(_window(0.5, 800.0), edges, source=_Instant())
    assert not isinstance(fine, str) and not isinstance(coarse, str)
    truth = [190.0, 5.0, 5.0, 15.0, 585.0]
    for got in (fine, coarse):
        assert sum(got.energy_j) == pytest.approx(800.0, rel=1e-12)
        for joules, bound, exact in zip(got.energy_j, got.bound_j, truth, strict=False):
            assert abs(joules - exact) <= bound
    # a 0.5 s timeline may misplace energy across a long span's edges 5 x more than a 10 ms one
    # on NVML, whose readings change only every 100 ms: samples 10 ms apart resolve no more
    assert coarse.timing_bound_j[4] > 4 * fine.timing_bound_j[4]
    assert coarse.resolution_s == pytest.approx(0.5) and fine.resolution_s == pytest.approx(0.1)
    # the window's own bound scales every span alike: 80.002 J of 800 J
    assert fine.scale_relative == pytest.approx(0.1000025)


def test_no_energy_or_spans_outside_the_window_give_the_reason(make_session, clock) -> None:
    s = make_session(make_cfg(energy=EnergySource.none))
    s.start()
    with s.window():
        clock.sleep(1.0)
    w = s.last_window
    got = span_energies(w, [w.start_s, w.end_s], source=s.source, unavailable_reason="CPU run")
    assert got == "energy unavailable: CPU run"
    outside = span_energies(_window(0.1, 800.0), [-1.0, 2.0], source=_Instant())
    assert isinstance(outside, str) and "not inside the measured window" in outside

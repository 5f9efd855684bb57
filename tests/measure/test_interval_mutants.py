"""Energy between two instants (llem.measure.interval) where mutation testing found no test
(scripts/mutation.py): the power curve's value at the interval's edges (between two samples,
before the first, after the last), the trapezoid and averaging-lag parts of its bound there, and
the samples of one device kept apart from another's. Each window is planted sample by sample;
each expected figure is worked out here from the planted samples and the module's docstring."""

from __future__ import annotations

import pytest

from llem.devices.gpu import SensorSpec
from llem.devices.readings import Sample
from llem.measure.interval import interval_energy
from llem.measure.meter import DeviceEnergy, WindowResult

# readings that are 1 s means; sensor +/- max(5 %, 5 W)
SPEC = SensorSpec(0.001, 0.1, 0.05, 5.0, 1.0, "planted", "a 1 s mean")


class _Source:
    def sensor(self, uuid: str) -> SensorSpec:
        return SPEC


def _window(
    samples: dict[str, list[tuple[float, float]]], energy: dict[str, float]
) -> WindowResult:
    times = sorted({t for pts in samples.values() for t, _ in pts})
    ticks = tuple(
        (t, tuple(Sample(t, u, power_w=w) for u, pts in samples.items() for s, w in pts if s == t))
        for t in times
    )
    devices = tuple(DeviceEnergy(u, "nvml_power", energy[u]) for u in samples)
    return WindowResult(0.0, 4.0, 4.0, devices, ticks, (), None, None, None)


def test_edges_between_samples_take_the_curve_s_value_there() -> None:
    """Samples 100, 200, 400, 400, 100 W at 0-4 s; [0.5, 3.5] starts at 150 W on the first ramp
    and ends at 250 W on the last. Energy: 87.5 + 300 + 400 + 162.5 J. Bound: the trapezoid of
    the pieces inside (|50| x 0.5 / 2 + |200| x 1 / 2 + 0 + |150| x 0.5 / 2 = 150 J), the 1 s
    averaging lag at the larger edge (250 J), the sensor's 5 % of 950 J."""
    pts = [(0.0, 100.0), (1.0, 200.0), (2.0, 400.0), (3.0, 400.0), (4.0, 100.0)]
    got = interval_energy(_window({"g": pts}, {"g": 1300.0}), 0.5, 3.5, source=_Source())
    assert got.value == pytest.approx(950.0)
    assert got.bound == pytest.approx(150.0 + 250.0 + 47.5)


def test_edges_outside_the_samples_hold_the_first_and_last_and_devices_stay_apart() -> None:
    """``g``: 100, 200, 400, 300 W at 0.5-3.5 s, held at 100 W before and 300 W after; ``b``:
    100 W throughout. Over [0, 4]: g 50 + 150 + 300 + 350 + 150 = 1000 J, bound 200 J of
    trapezoid (the 100 W and 200 W steps inside, and the 100 W fall) + 300 J of lag + 50 J
    sensor; b 400 J, bound 100 J of lag + 20 J (5 W x 4 s)."""
    g = [(0.5, 100.0), (1.5, 200.0), (2.5, 400.0), (3.5, 300.0)]
    b = [(t, 100.0) for t, _ in g]
    got = interval_energy(
        _window({"g": g, "b": b}, {"g": 1000.0, "b": 400.0}), 0.0, 4.0, source=_Source()
    )
    assert got.value == pytest.approx(1400.0)
    assert got.bound == pytest.approx((200.0 + 300.0 + 50.0) + (100.0 + 20.0))


class _NoSpec:
    def sensor(self, uuid: str) -> None:
        return None


def _device_why(device: DeviceEnergy, pts: list[tuple[float, float]], source=None) -> str | None:
    ticks = tuple((t, (Sample(t, "g", power_w=w),)) for t, w in pts)
    window = WindowResult(0.0, 4.0, 4.0, (device,), ticks, (), None, None, None)
    return interval_energy(window, 1.0, 2.0, source=source or _Source()).null_reason


def test_a_device_without_energy_for_the_interval_says_why() -> None:
    two = [(0.0, 100.0), (4.0, 100.0)]
    assert _device_why(DeviceEnergy("g", "nvml_power", None), two) == (
        "no energy for g: not measured"
    )
    failed = DeviceEnergy("g", "nvml_power", None, "the reader failed")
    assert _device_why(failed, two) == "no energy for g: the reader failed"
    one = [(2.0, 100.0)]
    assert _device_why(DeviceEnergy("g", "nvml_power", 400.0), one) == (
        "no energy for g: fewer than 2 power samples in the window"
    )
    assert _device_why(DeviceEnergy("g", "nvml_power", 400.0), two, _NoSpec()) == (
        "no energy for g: nvml_power energy has no sensor figures to bound it"
    )
    flat = [(0.0, 0.0), (4.0, 0.0)]
    assert _device_why(DeviceEnergy("g", "nvml_counter", 5.0), flat) == (
        "no energy for g: the sampled power integrates to 0 J over the window"
    )


def test_two_samples_are_enough() -> None:
    ticks = ((0.0, (Sample(0.0, "g", power_w=100.0),)), (4.0, (Sample(4.0, "g", power_w=100.0),)))
    device = DeviceEnergy("g", "nvml_power", 400.0)
    window = WindowResult(0.0, 4.0, 4.0, (device,), ticks, (), None, None, None)
    assert interval_energy(window, 1.0, 2.0, source=_Source()).value == pytest.approx(100.0)


def test_edges_between_samples_half_a_second_apart() -> None:
    """Samples 0.5 s apart, 100 W rising to 300 W between 1 and 1.5 s: [1.25, 2] starts at
    200 W. Energy 62.5 + 150 J; bound 12.5 J of trapezoid (|100| x 0.25 / 2 + 0), 300 J of lag,
    and 5 W x 0.75 s = 3.75 J against 5 % of 212.5 J (10.6 J) for the sensor."""
    pts = [(i * 0.5, 100.0 if i < 3 else 300.0) for i in range(9)]
    got = interval_energy(_window({"g": pts}, {"g": 1000.0}), 1.25, 2.0, source=_Source())
    assert got.value == pytest.approx(62.5 + 150.0)
    assert got.bound == pytest.approx(12.5 + 300.0 + 0.05 * 212.5)


def _counter(energy_j: float, watts: float, parts: dict[str, float]) -> WindowResult:
    device = DeviceEnergy("g", "nvml_counter", energy_j, None, sum(parts.values()), parts)
    ticks = tuple((t, (Sample(t, "g", power_w=watts),)) for t in (0.0, 1.0, 2.0, 3.0, 4.0))
    return WindowResult(0.0, 4.0, 4.0, (device,), ticks, (), None, None, None)


def test_a_counter_s_own_bound_is_shared_by_the_energy_of_each_interval() -> None:
    """Half a joule counted over 4 s of samples at 0.25 W (1 J): [1, 2] holds a quarter of it,
    and a quarter of the counter's 0.2 J resolution and update bound; the lag of the readings is
    scaled with them (1 s x 0.25 W x 0.5); the sensor part is taken over the interval itself
    (5 W x 1 s)."""
    parts = {"counter_resolution_j": 0.002, "counter_update_j": 0.198, "sensor_accuracy_j": 20.0}
    got = interval_energy(_counter(0.5, 0.25, parts), 1.0, 2.0, source=_Source())
    assert got.value == pytest.approx(0.125)
    assert got.bound == pytest.approx(0.05 + 0.125 + 5.0)  # share, lag, sensor


def test_a_counter_that_did_not_move_gives_no_energy_and_no_share_of_its_bound() -> None:
    parts = {"counter_resolution_j": 0.002, "counter_update_j": 0.2, "sensor_accuracy_j": 20.0}
    got = interval_energy(_counter(0.0, 100.0, parts), 1.0, 2.0, source=_Source())
    assert got.value == 0.0
    assert got.bound == pytest.approx(0.0 + 0.0 + 5.0)  # scaled to 0 W; the sensor's 5 W x 1 s


def test_integrated_power_has_no_counter_share() -> None:
    """A device without a counter: its own bound's parts (trapezoid, lag) are over the whole
    window; the interval's are its own."""
    device = DeviceEnergy("g", "nvml_power", 400.0, None, 90.0, {"trapezoid_j": 70.0, "x": 20.0})
    ticks = tuple((t, (Sample(t, "g", power_w=100.0),)) for t in (0.0, 2.0, 4.0))
    window = WindowResult(0.0, 4.0, 4.0, (device,), ticks, (), None, None, None)
    got = interval_energy(window, 1.0, 2.0, source=_Source())
    assert got.bound == pytest.approx(0.0 + 100.0 + 5.0)


def test_the_window_s_reasons() -> None:
    pts = {"a": [(0.0, 100.0), (4.0, 100.0)], "b": [(0.0, 100.0), (4.0, 100.0)]}
    w = _window(pts, {"a": 400.0, "b": 400.0})
    assert interval_energy(w, 1.0, 2.0, source=None).null_reason == (
        "energy unavailable: no energy source"
    )
    empty = WindowResult(0.0, 4.0, 4.0, (), (), (), None, None, None)
    assert interval_energy(empty, 1.0, 2.0, source=_Source()).null_reason == (
        "energy unavailable: no energy source"
    )
    failed = WindowResult(0.0, 4.0, 4.0, w.devices, w.ticks, (), "NVML lost the GPU", None, None)
    assert interval_energy(failed, 1.0, 2.0, source=_Source()).null_reason == (
        "power source failed: NVML lost the GPU"
    )
    assert interval_energy(w, 2.0, 2.0, source=_Source()).null_reason == (
        "[2.000000, 2.000000] is not a span inside the measured window [0.000000, 4.000000]"
    )
    unmeasured = [DeviceEnergy("a", "nvml_power", None), DeviceEnergy("b", "nvml_power", None)]
    none = WindowResult(0.0, 4.0, 4.0, tuple(unmeasured), w.ticks, (), None, None, None)
    assert interval_energy(none, 1.0, 2.0, source=_Source()).null_reason == (
        "no energy for a: not measured; b: not measured"
    )


def test_edges_within_a_nanosecond_of_the_window_are_inside_it() -> None:
    w = _window({"g": [(0.0, 100.0), (4.0, 100.0)]}, {"g": 400.0})
    got = interval_energy(w, 0.0 - 1e-9, 4.0 + 1e-9, source=_Source())
    assert got.value == pytest.approx(400.0)

"""Energy between two instants (llem.measure.interval) where mutation testing found no test
(scripts/mutation.py): the power curve's value at the interval's edges (between two samples,
before the first, after the last), the trapezoid and averaging-lag parts of its bound there, and
the samples of one device kept apart from another's. Each window is planted sample by sample;
each expected figure is worked out here from the planted samples and the module's docstring."""

from __future__ import annotations

import pytest

from llem.devices.gpu import SensorSpec
from llem.devices.readings import Sample
from llem.measure.energy import DeviceEnergy, WindowResult
from llem.measure.interval import interval_energy

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

"""Bounds of a window's energy (llem.measure.uncertainty) where mutation testing found no test
(scripts/mutation.py): a step in the last sample interval, the averaged readings at both
edges, the words recorded for each source, and the derived figures' bounds over short windows,
small energies and unknown bounds."""

from __future__ import annotations

import pytest

from llem.devices.gpu import SensorSpec
from llem.measure import uncertainty as u

SPEC = SensorSpec(0.001, 0.1, 0.05, 5.0, 0.0, "planted")
AVERAGED = SensorSpec(0.001, 0.1, 0.05, 5.0, 1.0, "planted", "a 1 s mean")


def test_a_step_in_the_last_sample_interval_may_hide_half_of_it() -> None:
    assert u.trapezoid_bound_j([0.0, 1.0, 2.0], [100.0, 100.0, 300.0]) == pytest.approx(100.0)
    assert u.trapezoid_bound_j([0.0, 1.0, 2.0], [300.0, 100.0, 100.0]) == pytest.approx(100.0)


@pytest.mark.parametrize(
    "watts,lag_j", [([300.0, 100.0, 100.0, 200.0], 300.0), ([100.0, 100.0, 50.0, 400.0], 400.0)]
)
def test_the_averaging_lag_is_that_of_the_first_or_the_last_reading(watts, lag_j) -> None:
    """A 1 s mean read at the window's edges misses up to 1 s of the larger edge reading."""
    parts = u.sampled_components([0.0, 1.0, 2.0, 3.0], watts, 600.0, 3.0, AVERAGED)
    assert parts["averaging_lag_j"] == pytest.approx(lag_j)


def test_each_source_s_bound_is_described_in_words() -> None:
    assert u.method_text("replay", SPEC) == (
        "exact integral of the trace: float rounding, 1e-09 x energy"
    )
    assert u.method_text("nvml_counter", SPEC) == (
        "energy counter: 2 x 1 mJ resolution + 100 ms update period x (power at start + power at "
        "end) + sensor accuracy max(5% x energy, 5 W x window_s) (planted)"
    )
    assert u.method_text("nvml_power", SPEC) == (
        "trapezoid integral: sum of |dP| x dt / 2 over consecutive power samples + "
        "sensor accuracy max(5% x energy, 5 W x window_s) (planted)"
    )
    assert u.method_text("nvml_power", AVERAGED) == (
        "trapezoid integral: sum of |dP| x dt / 2 over consecutive power samples + "
        "averaging lag 1 s x max(first, last reading) where the readings are 1 s averages "
        "(a 1 s mean) + sensor accuracy max(5% x energy, 5 W x window_s) (planted)"
    )


def test_a_ratio_s_bound_needs_a_bound_and_a_positive_denominator() -> None:
    assert u.ratio_bound(None, 5.0) is None
    assert u.ratio_bound(3.0, 0.0) is None
    assert u.ratio_bound(3.0, 0.5) == pytest.approx(6.0)  # W over a half-second window


def test_an_inverse_ratio_s_bound_over_half_a_joule() -> None:
    """10 tokens in 0.5 +/- 0.1 J: at most 10 / 0.4 = 25 tokens/J where 20 were reported."""
    assert u.inverse_ratio_bound(10, 0.5, 0.1) == pytest.approx(5.0)
    assert u.inverse_ratio_bound(10, 10.0, None) is None


def test_the_sensor_s_absolute_accuracy_is_over_the_window_s_own_length() -> None:
    """5 W over a half-second window is 2.5 J, more than 5 % of its 10 J."""
    assert u.sensor_bound_j(10.0, 0.5, SPEC) == pytest.approx(2.5)

"""Energy of consecutive spans (llem.measure.span_energy) where mutation testing found no test
(scripts/mutation.py): the timeline held flat before the first sample and after the last, its
resolution, the energy and bounds of several devices, a span no sample saw, the range of the
samples near a span's edges, the counter scaling's part of a bound, and every reason a span
has no energy. Each window is planted sample by sample; each expected figure is worked out
here from the planted samples and what the module's docstring says a figure is."""

from __future__ import annotations

import pytest

from llem.config.schema import EnergySource
from llem.devices.gpu import SensorSpec
from llem.devices.readings import Sample
from llem.measure.meter import DeviceEnergy, WindowResult
from llem.measure.span_energy import SpanEnergies, span_energies
from tests.measure.conftest import make_cfg

Samples = list[tuple[float, float]]  # (s, W)


def _window(
    devices: list[DeviceEnergy], samples: dict[str, Samples], end_s: float = 1.0
) -> WindowResult:
    times = sorted({t for pts in samples.values() for t, _ in pts})
    ticks = tuple(
        (t, tuple(Sample(t, u, power_w=w) for u, pts in samples.items() for s, w in pts if s == t))
        for t in times
    )
    return WindowResult(0.0, end_s, end_s, tuple(devices), ticks, (), None, None, None)


class _Source:
    def __init__(self, spec: SensorSpec | None) -> None:
        self.spec = spec

    def sensor(self, uuid: str) -> SensorSpec | None:
        return self.spec


NO_REFRESH = SensorSpec(0.001, 0.0, 0.0, 0.0, 0.0, "planted")


def _spans(window: WindowResult, edges: list[float], **kw: object) -> SpanEnergies:
    got = span_energies(window, edges, source=kw.pop("source", _Source(NO_REFRESH)), **kw)
    assert not isinstance(got, str), got
    return got


def test_the_curve_holds_the_first_and_last_samples_out_to_the_window_s_edges() -> None:
    """Samples at 0.25 s (100 W) and 0.75 s (300 W) of a 1 s window: 100 W until 0.25 s, a
    ramp to 300 W, 300 W after 0.75 s."""
    w = _window([DeviceEnergy("g", "nvml_power", 200.0)], {"g": [(0.25, 100.0), (0.75, 300.0)]})
    got = _spans(w, [0.0, 0.25, 0.5, 0.75, 1.0])
    assert got.energy_j == pytest.approx((25.0, 37.5, 62.5, 75.0))
    assert got.resolution_s == pytest.approx(0.5)  # the samples' largest gap
    assert got.scale_relative == 0.0  # the device's energy came without a bound


def test_the_resolution_adds_the_readings_averaging_and_needs_no_sensor() -> None:
    w = _window([DeviceEnergy("g", "nvml_power", 200.0)], {"g": [(0.25, 100.0), (0.75, 300.0)]})
    averaged = SensorSpec(0.001, 0.1, 0.0, 0.0, 0.2, "planted")
    assert _spans(w, [0.0, 1.0], source=_Source(averaged)).resolution_s == pytest.approx(0.7)
    refreshed = SensorSpec(0.001, 0.6, 0.0, 0.0, 0.0, "planted")  # slower than the samples
    assert _spans(w, [0.0, 1.0], source=_Source(refreshed)).resolution_s == pytest.approx(0.6)
    assert _spans(w, [0.0, 1.0], source=_Source(None)).resolution_s == pytest.approx(0.5)


def test_a_replayed_trace_is_exact_where_its_power_changes(tmp_path, make_session, clock) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("time_s,device,power_w\n0,g,100\n1,g,100\n1,g,400\n100,g,400\n")
    s = make_session(make_cfg(energy=EnergySource.replay, replay_trace=str(trace)), indices=None)
    s.start()
    with s.window():
        clock.sleep(2.0)
    w = s.last_window
    origin = s.source.origin_s
    got = span_energies(w, [w.start_s, origin + 0.5, origin + 1.5, w.end_s], source=s.source)
    assert not isinstance(got, str)
    first = 100.0 * (origin + 0.5 - w.start_s)
    assert got.energy_j == pytest.approx((first, 50.0 + 200.0, 400.0 * (w.end_s - origin - 1.5)))
    assert got.resolution_s == 0.0 and got.power_range_w == 0.0
    assert got.edge_j == (0.0, 0.0, 0.0)


def test_the_spans_of_several_devices_add_their_energies_and_bounds() -> None:
    """Two devices: ``g`` 100 W then 300 W (samples 0.5 s apart), ``z`` 0 W; span [2.5, 3.0]
    holds the samples at its edges, within 2 r = 1 s of which ``g`` read 100 and 300 W."""
    pts = [(i * 0.5, 100.0 if i < 4 else 300.0) for i in range(9)]
    zero = [(i * 0.5, 0.0) for i in range(9)]
    w = _window(
        [DeviceEnergy("g", "nvml_power", 850.0, None, 42.5), DeviceEnergy("z", "nvml_power", 0.0)],
        {"g": pts, "z": zero},
        end_s=4.0,
    )
    got = _spans(w, [0.0, 2.5, 3.0, 4.0])
    assert got.energy_j == pytest.approx((400.0, 150.0, 300.0))
    assert got.timing_bound_j[1] == pytest.approx(200.0 * 0.5)  # 200 W x the span's 0.5 s
    assert got.edge_j[1] == pytest.approx(200.0 * 0.5)
    assert got.timing_bound_j[0] == pytest.approx(200.0 * 1.0 + 50.0)  # 2 r; 1.5-2 s inside
    assert got.power_range_w == pytest.approx(200.0)
    assert got.scale_relative == pytest.approx(0.05)  # g's 42.5 J of 850 J; z measured 0 J
    assert got.method.startswith("step energy: the sampled power timeline")


def test_the_counter_scaling_adds_its_part_of_each_span() -> None:
    """The counter says twice what the samples integrate to (1700 J of 850 J): every span is
    doubled, and the half of it the scaling added, whose place in time the samples do not show,
    joins its bound (as does the doubled range, and the doubled trapezoid bound inside)."""
    pts = [(i * 0.5, 100.0 if i < 4 else 300.0) for i in range(9)]
    w = _window([DeviceEnergy("g", "nvml_counter", 1700.0)], {"g": pts}, end_s=4.0)
    got = _spans(w, [0.0, 1.0, 2.5, 4.0])
    assert got.energy_j == pytest.approx((200.0, 600.0, 900.0))
    # [1, 2.5]: 400 W range x 2 r, + half of 600 J, + the 1.5-2 s sample step: 2 x 200 x 0.5 / 2
    assert got.timing_bound_j[1] == pytest.approx(400.0 * 1.0 + 300.0 + 100.0)
    assert got.edge_j[1] == pytest.approx(400.0)
    assert got.timing_bound_j[0] == pytest.approx(400.0 * 1.0 + 100.0)  # no step inside it


@pytest.mark.parametrize("ceiling_w,unseen_w", [(None, 0.0), (1000.0, 500.0)])
def test_a_span_no_sample_saw_is_bounded_by_the_power_ceiling(ceiling_w, unseen_w) -> None:
    """[0.6, 0.8] lies between two samples 0.5 s apart: nothing says what its power did there,
    so up to each device's share of the ceiling (1000 W over two devices) may cross its edges;
    without a ceiling, the peak sample (0 W here) is all there is."""
    zero = [(i * 0.5, 0.0) for i in range(5)]
    w = _window(
        [DeviceEnergy("a", "nvml_power", 0.0), DeviceEnergy("b", "nvml_power", 0.0)],
        {"a": zero, "b": zero},
        end_s=2.0,
    )
    got = _spans(w, [0.0, 0.6, 0.8, 2.0], ceiling_w=ceiling_w)
    assert got.edge_j[1] == pytest.approx(2 * unseen_w * 0.2)
    assert got.timing_bound_j[1] == pytest.approx(2 * unseen_w * 0.2)
    assert got.edge_j[2] == 0.0  # samples inside it: flat at 0 W


@pytest.mark.parametrize(
    "spike_s,counted",
    [(3.5, False), (4.0, True), (4.5, True), (6.5, True), (7.0, True), (7.5, False)],
)
def test_the_range_near_a_span_s_edges_is_the_samples_within_2r_and_the_next_ones(
    spike_s, counted
) -> None:
    """Span [5.1, 5.6] of a 100 W timeline sampled every 0.5 s (r = 0.5 s): energy can cross
    its edges from within 2 r of them, [4.1, 6.1] and [4.6, 6.6], where the curve runs through
    the samples in them and the next ones out (4.0 and 7.0 s). A single 500 W sample there
    widens the range by 400 W; one further out does not."""
    pts = [(i * 0.5, 500.0 if i * 0.5 == spike_s else 100.0) for i in range(21)]
    w = _window([DeviceEnergy("g", "nvml_power", 1000.0)], {"g": pts}, end_s=10.0)
    got = _spans(w, [0.0, 5.1, 5.6, 10.0])
    assert got.edge_j[1] == pytest.approx(400.0 * 0.5 if counted else 0.0)


def test_a_span_at_the_window_s_start_sees_the_first_sample() -> None:
    """[0, 0.2]: the samples near it are the first ones, 500 W at 0 s among them."""
    pts = [(0.0, 500.0)] + [(i * 0.5, 100.0) for i in range(1, 9)]
    w = _window([DeviceEnergy("g", "nvml_power", 500.0)], {"g": pts}, end_s=4.0)
    assert _spans(w, [0.0, 0.2, 4.0]).edge_j[0] == pytest.approx(400.0 * 0.2)


def test_two_samples_are_enough_and_a_zero_length_span_has_no_energy() -> None:
    w = _window([DeviceEnergy("g", "nvml_power", 200.0)], {"g": [(0.0, 200.0), (1.0, 200.0)]})
    got = _spans(w, [0.0, 0.5, 0.5, 1.0])
    assert got.energy_j == pytest.approx((100.0, 0.0, 100.0))


def test_a_counter_below_the_samples_scales_them_down_and_bounds_what_it_removed() -> None:
    """Half a joule counted where 1 W was sampled for 1 s: every span is halved, and the half
    the scaling removed joins its bound; the window's own bound, 0.05 J, is a tenth of it."""
    w = _window(
        [DeviceEnergy("g", "nvml_counter", 0.5, None, 0.05)], {"g": [(0.0, 1.0), (1.0, 1.0)]}
    )
    got = _spans(w, [0.0, 0.5, 1.0])
    assert got.energy_j == pytest.approx((0.25, 0.25))
    assert got.timing_bound_j == pytest.approx((0.25, 0.25))
    assert got.scale_relative == pytest.approx(0.1)


def test_a_counter_that_did_not_move_gives_every_span_nothing() -> None:
    """0 J counted while 100 W was sampled: the spans are 0 J, and so is what may move."""
    w = _window([DeviceEnergy("g", "nvml_counter", 0.0)], {"g": [(0.0, 100.0), (1.0, 300.0)]})
    got = _spans(w, [0.0, 0.5, 1.0])
    assert got.energy_j == (0.0, 0.0) and got.timing_bound_j == (0.0, 0.0)


def test_a_step_inside_a_span_s_last_sample_interval_is_in_its_bound() -> None:
    """[1, 2] holds the samples at 1, 1.5 and 2 s; power steps from 100 to 300 W between the last
    two, which may hide 200 W x 0.5 s / 2 = 50 J anywhere in that interval."""
    pts = [(i * 0.5, 100.0 if i < 4 else 300.0) for i in range(9)]
    w = _window([DeviceEnergy("g", "nvml_power", 850.0)], {"g": pts}, end_s=4.0)
    got = _spans(w, [0.0, 1.0, 2.0, 4.0])
    assert got.timing_bound_j[1] - got.edge_j[1] == pytest.approx(50.0)


def test_a_span_between_two_samples_has_no_trapezoid_part() -> None:
    """[0.6, 0.8] lies between the samples at 0.5 s (100 W) and 1 s (300 W): no sample interval
    lies inside it, so all its bound is what may cross its edges (the 300 W peak x 0.2 s)."""
    pts = [(0.0, 100.0), (0.5, 100.0), (1.0, 300.0), (1.5, 300.0), (2.0, 300.0)]
    w = _window([DeviceEnergy("g", "nvml_power", 500.0)], {"g": pts}, end_s=2.0)
    got = _spans(w, [0.0, 0.6, 0.8, 2.0])
    assert got.timing_bound_j[1] == pytest.approx(300.0 * 0.2)


def test_an_unseen_span_longer_than_2r_is_bounded_at_2r() -> None:
    """Samples 2 s apart (r = 2 s): [0.1, 1.9] saw none; 1.8 s is less than 2 r, so all of it
    may cross its edges, at the 100 W peak."""
    pts = [(0.0, 100.0), (2.0, 100.0), (4.0, 100.0)]
    w = _window([DeviceEnergy("g", "nvml_power", 400.0)], {"g": pts}, end_s=4.0)
    assert _spans(w, [0.0, 0.1, 1.9, 4.0]).edge_j[1] == pytest.approx(100.0 * 1.8)


@pytest.mark.parametrize(
    "spike_s,counted", [(6.0, True), (6.5, True), (7.0, False), (7.5, False), (8.0, True)]
)
def test_a_long_span_s_range_is_near_its_edges_not_in_its_middle(spike_s, counted) -> None:
    """Span [5.1, 9.1], r = 0.5 s: the samples near its edges are 4.0-6.5 s and 8.0-10.5 s; a
    500 W sample at 7.0 or 7.5 s, in its middle, cannot cross an edge."""
    pts = [(i * 0.5, 500.0 if i * 0.5 == spike_s else 100.0) for i in range(25)]
    w = _window([DeviceEnergy("g", "nvml_power", 1200.0)], {"g": pts}, end_s=12.0)
    got = _spans(w, [0.0, 5.1, 9.1, 12.0])
    assert got.edge_j[1] == pytest.approx(400.0 * 1.0 if counted else 0.0)


def _why(window: WindowResult | None, edges: list[float], **kw: object) -> str:
    got = span_energies(window, edges, source=kw.pop("source", _Source(NO_REFRESH)), **kw)
    assert isinstance(got, str)
    return got


def test_every_span_without_energy_says_why() -> None:
    ok = {"g": [(0.0, 100.0), (1.0, 100.0)]}
    assert _why(None, [0.0, 1.0]) == "no measured window"
    w = _window([DeviceEnergy("g", "nvml_power", 100.0)], ok)
    assert _why(w, [0.0, 1.0], source=None) == "energy unavailable: no energy source"
    no_devices = _window([], {})
    assert _why(no_devices, [0.0, 1.0]) == "energy unavailable: no energy source"
    assert _why(w, [0.0, 0.6, 0.4, 1.0]) == (
        "no spans: the edges are fewer than 2 or not in time order"
    )
    assert _why(w, [0.0, 1.0, 0.5]).startswith("no spans")
    assert _why(w, [0.0, 0.5, 2.0]) == (
        "[0.000000, 2.000000] is not inside the measured window [0.000000, 1.000000]"
    )
    unmeasured = _window([DeviceEnergy("g", "nvml_power", None)], ok)
    assert _why(unmeasured, [0.0, 1.0]) == "no energy for g: not measured"
    why = DeviceEnergy("g", "nvml_power", None, "the reader failed")
    assert _why(_window([why], ok), [0.0, 1.0]) == "no energy for g: the reader failed"
    one = _window([DeviceEnergy("g", "nvml_power", 100.0)], {"g": [(0.5, 100.0)]})
    assert _why(one, [0.0, 1.0]) == "no energy for g: fewer than 2 power samples in the window"
    flat = _window([DeviceEnergy("g", "nvml_counter", 5.0)], {"g": [(0.0, 0.0), (1.0, 0.0)]})
    assert _why(flat, [0.0, 1.0]) == (
        "no energy for g: the sampled power integrates to 0 J over the window"
    )


def test_edges_within_a_nanosecond_of_the_window_are_inside_it() -> None:
    w = _window([DeviceEnergy("g", "nvml_power", 100.0)], {"g": [(0.0, 100.0), (1.0, 100.0)]})
    got = _spans(w, [0.0 - 1e-9, 0.5, 1.0 + 1e-9])
    assert got.energy_j == pytest.approx((50.0, 50.0))

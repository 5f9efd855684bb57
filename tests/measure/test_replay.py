"""The replay source: a recorded trace played on the session clock, integrated exactly."""

from __future__ import annotations

import csv

import pytest

from llem.config.schema import EnergySource
from llem.errors import PreflightError
from llem.measure.integrate import integrate_linear
from llem.measure.sampler import RealClock
from llem.testing.fake_pynvml import FakeGpu, Square

from .conftest import assert_nulls_explained, make_cfg

TRACE = """time_s,device,power_w,temperature_c
0,gpu-A,50,40
1,gpu-A,50,40
1,gpu-A,200,41
3,gpu-A,200,60
4,gpu-A,100,50
0,gpu-B,30,35
10,gpu-B,30,35
"""


def write(tmp_path, text, name="trace.csv"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_known_trace(tmp_path, make_session, clock):
    trace = write(tmp_path, TRACE)
    s = make_session(
        make_cfg(
            energy=EnergySource.replay, replay_trace=trace, idle_baseline_s=0.5, sample_hz=10.0
        ),
        indices=None,
    )
    assert s.preflight() == []
    s.start()  # trace time 0; idle covers [0, 0.5]
    clock.sleep(0.3)
    with s.window() as w:  # trace time [0.8, 3.5]
        clock.sleep(2.7)
    assert (w.start_s, w.end_s) == pytest.approx((0.8, 3.5))
    rep = s.measurement(output_tokens=100, requests=4)
    e = rep.energy
    assert e.source == "replay"
    a_j = 50 * 0.2 + 200 * 2.0 + (200 + 150) / 2 * 0.5
    assert e.per_device_j == pytest.approx({"gpu-A": a_j, "gpu-B": 30 * 2.7}, rel=1e-9)
    assert e.idle_power_w == pytest.approx(80.0)
    assert e.idle_adjusted_j == pytest.approx(a_j + 81.0 - 80.0 * 2.7)
    assert e.peak_power_w == pytest.approx(230.0)
    assert rep.thermal.max_temp_c == pytest.approx(60.0)
    assert rep.devices[0].uuid == "gpu-A" and rep.devices[0].name == "replay:trace.csv"
    assert_nulls_explained(rep)
    path = tmp_path / "ts.csv"
    s.write_timeseries(path)
    rows = [r for r in csv.DictReader(path.open()) if r["device"] == "gpu-A"]
    assert float(rows[0]["power_w"]) == 50.0  # trace time 0.8
    assert float(rows[3]["power_w"]) == 200.0  # trace time 1.1
    assert float(rows[-1]["power_w"]) == pytest.approx(150.0)  # trace time 3.5


def test_window_past_the_end_of_the_trace_warns(tmp_path, make_session, clock):
    trace = write(tmp_path, "time_s,device,power_w\n0,g,100\n2,g,100\n")
    s = make_session(make_cfg(energy=EnergySource.replay, replay_trace=trace))
    s.start()
    with s.window():
        clock.sleep(3.0)
    e = s.measurement(output_tokens=1, requests=1).energy
    assert e.total_j == pytest.approx(300.0)
    assert any("ends at 2.000 s" in w for w in e.warnings)


@pytest.mark.parametrize(
    "text, problem",
    [
        (None, "file not found"),
        ("time_s,watts\n0,1\n", "missing columns device, power_w (needs time_s, device, power_w)"),
        ("time_s,device,power_w\n0,g,abc\n", "line 2: power_w='abc' is not a number"),
        (
            "time_s,device,power_w\n1,g,5\n0,g,5\n",
            "line 3: time_s=0.0 goes back in time for device g",
        ),
        ("time_s,device,power_w\n", "no rows"),
    ],
)
def test_trace_problems(tmp_path, make_session, text, problem):
    trace = str(tmp_path / "missing.csv") if text is None else write(tmp_path, text)
    s = make_session(make_cfg(energy=EnergySource.replay, replay_trace=trace))
    assert s.preflight() == [f"measurement.replay_trace={trace}: {problem}"]
    with pytest.raises(PreflightError):
        s.start()


def test_replay_without_a_trace(make_session):
    s = make_session(make_cfg(energy=EnergySource.replay))
    assert s.preflight() == [
        "measurement.energy=replay needs measurement.replay_trace "
        "(a CSV with columns time_s, device, power_w)"
    ]


def test_replay_works_on_a_cpu_run(tmp_path, make_session, clock):
    trace = write(tmp_path, "time_s,device,power_w\n0,g,100\n10,g,300\n")
    s = make_session(
        make_cfg(energy=EnergySource.replay, replay_trace=trace), device_type="cpu", indices=None
    )
    s.start()
    clock.sleep(1.0)
    with s.window():
        clock.sleep(2.0)
    assert s.measurement(output_tokens=1, requests=1).energy.total_j == pytest.approx(
        (120 + 160) / 2 * 2.0
    )


def test_an_llem_timeseries_replays_to_the_same_energy(install_nvml, make_session, clock, tmp_path):
    """Record a power-integrated run, replay its timeseries.csv: the same joules come out."""
    install_nvml([FakeGpu("GPU-x", architecture=4, power=Square(90, 310, 0.6, 1000.05))])
    s = make_session(make_cfg(sample_hz=20.0))
    s.start()
    with s.window():
        clock.sleep(2.5)
    recorded = s.measurement(output_tokens=1, requests=1).energy.total_j
    s.write_timeseries(tmp_path / "timeseries.csv")
    r = make_session(
        make_cfg(energy=EnergySource.replay, replay_trace=str(tmp_path / "timeseries.csv"))
    )
    r.start()
    with r.window():
        clock.sleep(2.5)
    assert r.measurement(output_tokens=1, requests=1).energy.total_j == pytest.approx(recorded)


def test_real_clock_replay_is_the_exact_integral(tmp_path, make_session):
    trace = write(tmp_path, "time_s,device,power_w\n0,g,100\n0.2,g,100\n0.2,g,400\n1,g,0\n")
    s = make_session(
        make_cfg(energy=EnergySource.replay, replay_trace=trace, min_window_s=0.1),
        clock=RealClock(),
    )
    s.start()
    s.clock.sleep(0.1)
    with s.window() as w:
        s.clock.sleep(0.3)
    exact = integrate_linear([0, 0.2, 0.2, 1], [100, 100, 400, 0], w.start_s, w.end_s)
    measured = s.measurement(output_tokens=1, requests=1).energy.total_j
    assert measured == pytest.approx(exact, rel=1e-9)


def test_integrate_linear_edges():
    assert integrate_linear([1, 2], [10, 20], 0, 3) == pytest.approx(10 + 15 + 20)
    assert integrate_linear([1, 1, 2], [10, 30, 30], 0.5, 1.5) == pytest.approx(5 + 15)
    assert integrate_linear([1, 2], [10, 20], 1.25, 1.75) == pytest.approx(7.5)
    assert integrate_linear([], [], 0, 1) == 0.0

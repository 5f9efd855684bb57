"""The window itself: sampler thread lifetime, CUDA sync at the edges, NVML failing mid-run."""

from __future__ import annotations

import csv
import logging
import math
import threading

import pytest

from llem.config.schema import EnergySource
from llem.measure import TIMESERIES_COLUMNS
from llem.measure.sampler import RealClock
from llem.result import Thermal
from llem.testing.fake_pynvml import Constant, FakeGpu, Step

from .conftest import assert_nulls_explained, make_cfg


def sampler_threads():
    return [t for t in threading.enumerate() if t.name == "llem-sampler"]


@pytest.mark.parametrize("real_clock", [False, True])
def test_sampler_thread_is_gone_after_an_exception(install_nvml, make_session, clock, real_clock):
    install_nvml([FakeGpu("GPU-a")], clock=RealClock() if real_clock else clock)
    kw = {"clock": RealClock()} if real_clock else {}
    s = make_session(make_cfg(sample_hz=50.0), **kw)
    s.start()
    with pytest.raises(ZeroDivisionError), s.window():
        assert len(sampler_threads()) == 1
        s.clock.sleep(0.1)
        1 / 0  # noqa: B018
    assert sampler_threads() == []
    rep = s.measurement(output_tokens=1, requests=1)  # what was measured is still there
    assert rep.energy.total_j > 0


def test_cuda_is_synchronised_at_both_edges(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a")])
    events = []
    s = make_session(make_cfg(), cuda_sync=lambda: events.append(("sync", clock.now())))
    s.start()
    assert events == []  # the idle baseline does not synchronise
    with s.window():
        events.append(("body", clock.now()))
        clock.sleep(1.0)
    assert [e[0] for e in events] == ["sync", "body", "sync"]
    with pytest.raises(RuntimeError), s.window():
        raise RuntimeError("generation failed")
    assert [e[0] for e in events][-2:] == ["sync", "sync"]


def test_no_sync_on_cpu_and_sync_failure_still_stops_sampler(install_nvml, make_session):
    calls = []
    s = make_session(
        make_cfg(energy=EnergySource.auto), device_type="cpu", cuda_sync=lambda: calls.append(1)
    )
    s.start()
    with s.window():
        pass
    assert calls == []

    def broken():
        raise RuntimeError("CUDA error: device-side assert")

    install_nvml([FakeGpu("GPU-a")])
    s2 = make_session(make_cfg(), cuda_sync=broken)
    s2.start()
    w = s2.window()
    with pytest.raises(RuntimeError, match="device-side assert"):
        w.__enter__()
    assert sampler_threads() == []


def test_elapsed_and_edges(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg())
    s.start()
    clock.sleep(0.25)
    with s.window() as w:
        assert w.elapsed_s() == 0.0
        clock.sleep(1.5)
        assert w.elapsed_s() == pytest.approx(1.5)
    clock.sleep(5.0)
    assert w.elapsed_s() == pytest.approx(1.5)  # frozen once ended
    assert (w.start_s, w.end_s) == pytest.approx((0.25, 1.75))


def test_nvml_failing_mid_window_does_not_raise(
    install_nvml, make_session, clock, caplog, tmp_path
):
    fake = install_nvml([FakeGpu("GPU-a", power=Constant(200.0))])
    s = make_session(make_cfg(energy=EnergySource.auto))
    s.start()
    gpu = fake.gpus[0]
    gpu.fail_after_calls = gpu.calls + 25  # a few samples in, the GPU falls off the bus
    with caplog.at_level(logging.WARNING), s.window():
        clock.sleep(2.0)
    assert sampler_threads() == []
    rep = s.measurement(output_tokens=100, requests=1)
    e = rep.energy
    assert e.source == "unavailable"
    assert "NVMLError_GpuIsLost" in e.unavailable_reason
    assert e.total_j is None and e.j_per_output_token is None
    assert e.window_s == pytest.approx(2.0)
    assert any("NVMLError_GpuIsLost" in w for w in e.warnings)
    assert "GpuIsLost" in caplog.text
    assert_nulls_explained(rep)
    # readings other than the counter fail into empty cells; the counter's failure voids energy
    assert any("NVML failed to read" in w and "temperature_c" in w for w in e.warnings)
    assert s.write_timeseries(tmp_path / "ts.csv") >= 1


def test_nvml_failing_during_idle_baseline(install_nvml, make_session, clock):
    fake = install_nvml([FakeGpu("GPU-a")])
    fake.gpus[0].fail_after_calls = 40  # set-up needs fewer calls than this
    s = make_session(make_cfg(idle_baseline_s=2.0))
    s.start()
    assert "NVMLError_GpuIsLost" in s.idle.null_reason


def test_timeseries_csv(install_nvml, make_session, clock, tmp_path):
    install_nvml(
        [
            FakeGpu("GPU-a", power=Step(100.0, 300.0, 1001.0), throttle_mask=0x24),
            FakeGpu("GPU-b", memory_used_bytes=5500 * 2**20),
        ]
    )
    s = make_session(make_cfg(sample_hz=10.0), indices=[0, 1])
    s.start()
    clock.sleep(0.5)
    with s.window():
        clock.sleep(1.0)
    path = tmp_path / "timeseries.csv"
    n = s.write_timeseries(path)
    rows = list(csv.DictReader(path.open()))
    assert tuple(rows[0]) == TIMESERIES_COLUMNS
    assert n == len(rows) == 2 * 11  # both edges + 9 ticks, for each device
    assert float(rows[0]["time_s"]) == 0.0 and float(rows[-1]["time_s"]) == pytest.approx(1.0)
    a = [r for r in rows if r["device"] == "GPU-a"]
    assert [float(r["power_w"]) for r in a[:6]] == [100.0] * 5 + [300.0]
    assert a[0]["throttle_reasons"] == "sw_power_cap|sw_thermal_slowdown"
    b = [r for r in rows if r["device"] == "GPU-b"]
    assert float(b[0]["memory_used_mb"]) == 5500.0 and b[0]["throttle_reasons"] == ""
    assert float(b[0]["temperature_c"]) == 40.0 and float(b[0]["gpu_util_pct"]) == 87.0
    rep = s.measurement(output_tokens=1, requests=1)
    assert rep.peak_device_used_mb.value == 5500.0
    assert rep.thermal == Thermal(
        max_temp_c=40.0,
        throttled=True,
        throttle_reasons=["sw_power_cap", "sw_thermal_slowdown"],
        power_capped_fraction=0.5,  # GPU-a capped in all its samples, GPU-b in none
        power_cap_reasons={"sw_power_cap": 0.5},
        temp_rise_c=0.0,
    )
    assert rep.energy.peak_power_w == pytest.approx(400.0)


@pytest.mark.slow
def test_real_clock_window_samples_at_the_configured_rate(install_nvml, make_session):
    real = RealClock()
    install_nvml([FakeGpu("GPU-a", power=Constant(150.0))], clock=real)
    s = make_session(make_cfg(sample_hz=20.0, min_window_s=0.1), clock=real)
    s.start()
    with s.window():
        real.sleep(0.5)
    rep = s.measurement(output_tokens=10, requests=1)
    # both edges and the ticks between, never more than 20 Hz gives over the window the machine
    # made of the 0.5 s sleep (a busy one stretches it, and delays ticks: fewer, never faster)
    window_s = rep.energy.window_s
    assert window_s is not None and window_s >= 0.5
    assert 3 <= len(s.last_window.ticks) <= 2 + math.floor(window_s * 20.0) + 1
    assert rep.energy.total_j == pytest.approx(150.0 * rep.energy.window_s, rel=1e-2)


def test_misuse_is_reported(install_nvml, make_session):
    install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg())
    with pytest.raises(RuntimeError, match="before start"):
        s.window()
    s.start()
    with pytest.raises(RuntimeError, match="before a window"):
        s.measurement(output_tokens=1, requests=1)
    with pytest.raises(RuntimeError, match="twice"):
        s.start()

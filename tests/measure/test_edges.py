"""Window edges (issue 9, item 8): the energy counters are read at the window's start and end
instants, before the sampler's first sample and after its last, so ``window_s`` and the counter
delta cover the same interval."""

from __future__ import annotations

import pytest

from llem.testing.fake_pynvml import Constant, FakeGpu

from .conftest import make_cfg


def test_window_s_and_counter_delta_cover_the_same_interval(install_nvml, make_session, clock):
    # Every NVML call on the main thread takes 10 ms of (virtual) time, so the edge reads take
    # time: a sample is 7 calls per device, a counter read 1.
    install_nvml([FakeGpu("GPU-a", power=Constant(300.0))], main_thread_call_s=0.01)
    s = make_session(make_cfg(sample_hz=10.0))
    s.start()
    with s.window():
        clock.sleep(3.0)
    rep = s.measurement(output_tokens=10, requests=1)
    e = rep.energy
    # Constant power: joules / seconds is exactly the power when both cover the same interval.
    # Taking the end instant before the end sample and counter reads gives about 307 W.
    assert e.avg_power_w == pytest.approx(300.0, abs=0.01)
    assert e.total_j == pytest.approx(300.0 * e.window_s, abs=0.003)


def test_counters_bracket_the_samples(install_nvml, make_session, clock):
    calls = []
    fake = install_nvml([FakeGpu("GPU-a")])
    counter, temperature = fake.nvmlDeviceGetTotalEnergyConsumption, fake.nvmlDeviceGetTemperature

    def logged_counter(h):
        calls.append(("counter", clock.now()))
        return counter(h)

    def logged_temperature(h, sensor):
        calls.append(("sample", clock.now()))
        return temperature(h, sensor)

    fake.nvmlDeviceGetTotalEnergyConsumption = logged_counter
    fake.nvmlDeviceGetTemperature = logged_temperature
    s = make_session(make_cfg())
    s.start()
    calls.clear()
    with s.window() as w:
        clock.sleep(1.0)
    kinds = [k for k, _ in calls]
    assert kinds[0] == "counter" and kinds[-1] == "counter"
    assert kinds.count("counter") == 2 and kinds[1] == "sample" and kinds[-2] == "sample"
    assert w.result is not None
    assert (calls[0][1], calls[-1][1]) == (w.result.start_s, w.result.end_s)

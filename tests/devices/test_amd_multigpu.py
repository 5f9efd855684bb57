"""Two AMD GPUs in one window (a tensor-parallel run): each GPU's energy is its planted integral;
when one GPU's counter is lost mid-window, that GPU's energy is null with the error, the other is
still measured, the total is null naming the lost GPU, and the verdict fails saying which."""

from __future__ import annotations

import pytest

from llem.testing.fake_amdsmi import FakeAmdGpu
from llem.testing.fake_pynvml import Constant, Square

from .conftest import make_cfg

T0 = 1000.0


def two_gpus(**b: object) -> list[FakeAmdGpu]:
    return [
        FakeAmdGpu("amd-gpu-a", power=Square(200.0, 500.0, period_s=0.7, phase_s=T0 + 0.2)),
        FakeAmdGpu("amd-gpu-b", power=Constant(350.0), **b),  # type: ignore[arg-type]
    ]


def measure(make_session, clock, fake, window_s: float = 3.0):
    s = make_session(fake, make_cfg(), indices=(0, 1))
    s.start()
    clock.sleep(0.1)
    a = clock.now()
    with s.window():
        clock.sleep(window_s)
    b = clock.now()
    return s.measurement(output_tokens=100, requests=1), a, b


def test_each_amd_gpu_is_its_planted_integral_and_they_sum(amd_machine, make_session, clock):
    fake = amd_machine(two_gpus())
    rep, a, b = measure(make_session, clock, fake)
    e = rep.energy
    assert e.source == "amdsmi_counter"
    for g in fake.gpus:
        truth = g.power.energy(a, b)
        assert e.per_device_j[g.uuid] == pytest.approx(truth, abs=e.total_j_uncertainty)
    assert e.total_j == pytest.approx(sum(e.per_device_j.values()))
    assert [d.vendor for d in rep.devices] == ["amd", "amd"]


def test_a_lost_amd_gpu_stays_that_gpus_and_the_verdict_names_it(amd_machine, make_session, clock):
    fake = amd_machine(two_gpus(counter_fails_at_s=T0 + 1.5))
    rep, a, b = measure(make_session, clock, fake)
    e, v = rep.energy, rep.validity
    gpu_a = fake.gpus[0]
    assert e.per_device_j["amd-gpu-a"] == pytest.approx(gpu_a.power.energy(a, b), rel=0.02)
    assert e.per_device_j["amd-gpu-b"] is None
    why = rep.null_reasons["energy.per_device_j.amd-gpu-b"]
    assert "AMDSMI_STATUS_DRIVER_NOT_LOADED" in why
    assert e.total_j is None and "amd-gpu-b" in rep.null_reasons["energy.total_j"]
    assert v.energy_valid is False and v.checks["energy_read"] == "failed"
    assert v.per_device["amd-gpu-b"]["energy_read"] == "failed"
    assert v.per_device["amd-gpu-a"]["energy_read"] == "passed"

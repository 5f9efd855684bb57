"""A run on several GPUs (issue 31 section 4): each GPU's energy, power and validity, their sum, and
one GPU's failing counter kept to that GPU. Truth is planted in the fake NVML's waveforms."""

from __future__ import annotations

import pytest

from llem.testing.fake_pynvml import Constant, FakeGpu, Ramp, Step, Waveform

from .conftest import assert_nulls_explained, make_cfg

T0 = 1000.0  # the virtual clock's start
PASCAL = 4
UUIDS = ("GPU-a", "GPU-b", "GPU-c", "GPU-d")


def four_gpus(**b_kw) -> list[FakeGpu]:
    return [
        FakeGpu("GPU-a", power=Constant(150.0)),
        FakeGpu("GPU-b", power=Step(100.0, 300.0, at_s=T0 + 1.5), **b_kw),
        FakeGpu("GPU-c", power=Ramp(80.0, 320.0, t0=T0 + 0.5, t1=T0 + 2.5)),
        FakeGpu("GPU-d", power=Constant(60.0)),
    ]


def run(make_session, clock, n: int, *, after_start=None, window_s: float = 3.0, **cfg):
    """A session over the first ``n`` GPUs; ``after_start(session)`` runs before the window."""
    s = make_session(make_cfg(**cfg), indices=range(n))
    s.start()
    if after_start is not None:
        after_start(s)
    a = clock.now()
    with s.window():
        clock.sleep(window_s)
    b = clock.now()
    return s, s.measurement(output_tokens=100, requests=4), a, b


def test_each_gpu_is_its_planted_integral_and_they_sum_to_the_total(
    install_nvml, make_session, clock
):
    fake = install_nvml(four_gpus())
    _, rep, a, b = run(make_session, clock, 4)
    e = rep.energy
    planted = {g.uuid: g.power.energy(a, b) for g in fake.gpus}
    assert set(e.per_device_j) == set(UUIDS)
    for uuid, joules in planted.items():
        assert e.per_device_j[uuid] == pytest.approx(joules, abs=2e-3)
        assert e.per_device_avg_power_w[uuid] == pytest.approx(joules / 3.0, abs=1e-3)
    assert e.total_j == pytest.approx(sum(planted.values()), abs=1e-2)
    assert e.per_device_peak_power_w == pytest.approx(
        {"GPU-a": 150.0, "GPU-b": 300.0, "GPU-c": 320.0, "GPU-d": 60.0}, abs=1e-3
    )
    assert rep.validity.energy_valid is True
    assert set(rep.validity.per_device) == set(UUIDS)
    assert all(v["energy_read"] == "passed" for v in rep.validity.per_device.values())
    assert_nulls_explained(rep)


def _lose_gpu_b(session) -> None:
    """A few samples into the window, GPU-b falls off the bus: every NVML call to it fails."""
    gpu = session.source.lib.module.gpus[1]
    gpu.fail_after_calls = gpu.calls + 25


def test_one_gpu_counter_failing_mid_window_stays_that_gpus(install_nvml, make_session, clock):
    fake = install_nvml(four_gpus())
    s, rep, a, b = run(make_session, clock, 4, after_start=_lose_gpu_b)
    e = rep.energy
    assert e.source == "nvml_counter" and e.unavailable_reason is None
    for g in fake.gpus:
        if g.uuid != "GPU-b":
            assert e.per_device_j[g.uuid] == pytest.approx(g.power.energy(a, b), abs=2e-3)
    assert e.per_device_j["GPU-b"] is None
    why_b = rep.null_reasons["energy.per_device_j.GPU-b"]
    assert "energy counter failed" in why_b and "NVMLError_GpuIsLost" in why_b
    assert e.total_j is None  # never a silent partial sum
    assert "GPU-b" in rep.null_reasons["energy.total_j"]
    assert "GPU-a" not in rep.null_reasons["energy.total_j"]
    assert e.j_per_output_token is None
    v = rep.validity
    assert v.energy_valid is False
    assert v.checks["energy_read"] == "failed"
    [problem] = [p for p in v.problems if "could not be measured" in p]
    assert "GPU-b" in problem and "NVMLError_GpuIsLost" in problem
    assert v.per_device["GPU-b"]["energy_read"] == "failed"
    assert v.per_device["GPU-a"]["energy_read"] == "passed"
    # the healthy GPUs were sampled to the window's end
    last_a = max(x.time_s for x in s.last_window.samples if x.device == "GPU-a")
    assert last_a == pytest.approx(b)
    assert any("GPU-b: energy unavailable" in w for w in e.warnings)
    assert_nulls_explained(rep)


def test_one_gpu_power_failing_without_a_counter(install_nvml, make_session, clock):
    """Pre-Volta GPUs: energy is integrated from power; GPU-b's power read fails once."""
    gpus = [
        FakeGpu("GPU-a", architecture=PASCAL, power=Constant(150.0)),
        FakeGpu(
            "GPU-b",
            architecture=PASCAL,
            power=Constant(90.0),
            failing_calls={"nvmlDeviceGetFieldValues": {12}},
        ),
    ]
    install_nvml(gpus)
    s, rep, a, b = run(make_session, clock, 2)
    e = rep.energy
    assert e.source == "nvml_power"
    assert e.per_device_j["GPU-a"] == pytest.approx(150.0 * (b - a), rel=1e-6)
    assert e.per_device_j["GPU-b"] is None
    assert "power reading failed" in rep.null_reasons["energy.per_device_j.GPU-b"]
    assert e.total_j is None and "GPU-b" in rep.null_reasons["energy.total_j"]
    assert rep.validity.energy_valid is False
    assert any("GPU-b" in p and "could not be measured" in p for p in rep.validity.problems)
    assert len([x for x in s.last_window.samples if x.device == "GPU-a"]) == 31  # every tick
    assert_nulls_explained(rep)


def test_one_gpu_throttling_is_named(install_nvml, make_session, clock):
    install_nvml(four_gpus(throttle_mask=0x08)[:2])  # GPU-b: hw_slowdown
    _, rep, _, _ = run(make_session, clock, 2)
    v = rep.validity
    assert v.energy_valid is False and v.checks["throttling"] == "failed"
    [problem] = v.problems
    assert problem.startswith("GPU-b was slowed down")
    assert v.per_device["GPU-b"]["throttling"] == "failed"
    assert v.per_device["GPU-a"]["throttling"] == "passed"
    assert rep.energy.total_j is not None  # a slowdown is judged, the energy still measured


def test_per_gpu_outcomes_name_the_gpu_for_temperature_and_idle_power(
    install_nvml, make_session, clock
):
    """GPU-b draws 500 W while idle (above 0.5 of its 700 W default limit) and warms 2 C/s in the
    window; GPU-a is idle at 60 W and steady."""
    gpus = [
        FakeGpu("GPU-a", power=Constant(60.0)),
        FakeGpu("GPU-b", power=Constant(500.0), temperature_c=lambda t: 40.0 + 2.0 * (t - T0)),
    ]
    install_nvml(gpus)
    _, rep, _, _ = run(make_session, clock, 2, idle_baseline_s=1.0)
    v = rep.validity
    assert v.checks["idle_power_plausible"] == "failed"
    assert v.per_device["GPU-b"]["idle_power_plausible"] == "failed"
    assert v.per_device["GPU-a"]["idle_power_plausible"] == "passed"
    assert [p for p in v.problems if "idle power" in p][0].startswith("The idle power of GPU-b,")
    assert v.checks["temperature_steady"] == "condition"
    assert v.per_device["GPU-b"]["temperature_steady"] == "condition"
    assert v.per_device["GPU-a"]["temperature_steady"] == "passed"
    [warmed] = v.conditions
    assert warmed.startswith("The temperature of GPU-b rose")
    assert rep.energy.per_device_avg_power_w == pytest.approx(
        {"GPU-a": 60.0, "GPU-b": 500.0}, abs=1e-3
    )


class _Spike(Waveform):
    """100 W, and 1000 W for 20 ms around ``at_s``."""

    def __init__(self, at_s: float) -> None:
        self.at_s = at_s

    def power(self, t: float) -> float:
        return 1000.0 if abs(t - self.at_s) < 0.01 else 100.0

    def energy(self, a: float, b: float) -> float:
        return 100.0 * (b - a)  # no counter on these GPUs: never asked for the spike's share


def test_peak_power_is_never_a_partial_sum(install_nvml, make_session, clock):
    """GPU-b's power read fails at the tick where GPU-a spikes: that tick's sum is unknown."""
    gpus = [
        FakeGpu("GPU-a", architecture=PASCAL, power=_Spike(T0 + 0.5)),
        # call 1 is the set-up probe, call 2 the window's first sample, call 7 the tick at 0.5 s
        FakeGpu(
            "GPU-b",
            architecture=PASCAL,
            power=Constant(90.0),
            failing_calls={"nvmlDeviceGetFieldValues": {7}},
        ),
    ]
    install_nvml(gpus)
    s, rep, a, _ = run(make_session, clock, 2)
    assert a == T0
    missing = [x.time_s for x in s.last_window.samples if x.device == "GPU-b"]
    assert T0 + 0.5 not in missing and len(missing) == 30
    assert rep.energy.peak_power_w == pytest.approx(190.0)  # before: 1000 W, GPU-a's alone
    assert rep.energy.per_device_peak_power_w == pytest.approx(
        {"GPU-a": 1000.0, "GPU-b": 90.0}, abs=1e-3
    )

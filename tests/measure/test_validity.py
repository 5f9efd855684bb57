"""The validity verdict: each check passing, failing or not checked; one sentence per problem."""

from __future__ import annotations

import dataclasses

import pytest

from llem.config.schema import EnergySource
from llem.devices.readings import Sample
from llem.measure.idle import IdleBaseline
from llem.measure.meter import DeviceEnergy, WindowResult
from llem.measure.temperature_rise import temperature_rise_c
from llem.measure.validity import CHECKS, assess
from llem.testing.fake_nvml_control import FakeControl
from llem.testing.fake_pynvml import Constant, FakeGpu, Step

from .conftest import make_cfg

T0 = 1000.0
#: the checks judged GPU by GPU (each GPU's outcome goes to ``validity.per_device``)
PER_DEVICE = (
    "sampler_coverage",
    "throttling",
    "temperature_steady",
    "idle_power_plausible",
    "energy_nonzero",
    "energy_read",
)


def verdict(install_nvml, make_session, clock, gpu=None, window_s=2.0, **cfg):
    install_nvml([gpu or FakeGpu("GPU-a")])
    s = make_session(make_cfg(**cfg))
    s.start()
    with s.window():
        clock.sleep(window_s)
    return s.measurement(output_tokens=10, requests=1)


def statuses(rep):
    return dict(rep.validity.checks)


def test_a_clean_window_is_valid(install_nvml, make_session, clock):
    rep = verdict(install_nvml, make_session, clock, idle_baseline_s=1.0)
    assert dataclasses.asdict(rep.validity) == {
        "energy_valid": True,
        "problems": [],
        "checks": dict.fromkeys(CHECKS, "passed"),
        "conditions": [],
        "per_device": {"GPU-a": dict.fromkeys(PER_DEVICE, "passed")},
    }


@pytest.mark.parametrize(
    "mask, status",
    [
        (0x08, "failed"),  # hw_slowdown
        (0x20, "failed"),  # sw_thermal_slowdown
        (0x04 | 0x40, "failed"),  # a power cap and a hardware thermal slowdown
        (0x80, "failed"),  # hw_power_brake_slowdown
        (0x04, "condition"),  # sw_power_cap alone: recorded, not judged
        (0x01, "passed"),
        (0x02, "passed"),
    ],
)
def test_throttling(install_nvml, make_session, clock, mask, status):
    rep = verdict(install_nvml, make_session, clock, FakeGpu("GPU-a", throttle_mask=mask))
    assert statuses(rep)["throttling"] == status
    assert rep.validity.energy_valid is (status != "failed")
    if status == "failed":
        assert rep.validity.problems[0].startswith("GPU-a was slowed down during the window (")


def test_power_cap_is_a_recorded_condition(install_nvml, make_session, clock):
    """sw_power_cap in one sample of the window (a big batch at the power limit): the run stays
    valid, and the share of the window capped, by reason, is in the thermal section."""

    def capped_once(t: float) -> int:  # the one sample at T0 + 0.5 s is capped
        return 0x04 if abs(t - (T0 + 0.5)) < 0.01 else 0

    rep = verdict(install_nvml, make_session, clock, FakeGpu("GPU-a", throttle_mask=capped_once))
    assert rep.validity.energy_valid is True
    assert statuses(rep)["throttling"] == "condition"
    assert rep.validity.problems == []
    [condition] = rep.validity.conditions
    # what NVML reported, with the power drawn in those samples (an H100 reported sw_power_cap
    # at about 300 W of a 700 W limit: the reason alone does not mean "at the limit")
    assert condition.startswith(
        "GPU-a's clocks were held down for power (NVML's sw_power_cap) in 5% of the window's "
        "samples, drawing "
    )
    assert rep.thermal.power_capped_fraction == pytest.approx(1 / 21)  # 1 of 21 samples
    assert rep.thermal.power_cap_reasons == {"sw_power_cap": pytest.approx(1 / 21)}
    assert rep.thermal.throttled is True  # still a throttle reason, as before

    always = verdict(install_nvml, make_session, clock, FakeGpu("GPU-a", throttle_mask=0x04))
    assert always.validity.energy_valid is True
    assert always.thermal.power_capped_fraction == 1.0
    calm = verdict(install_nvml, make_session, clock, FakeGpu("GPU-a"))
    assert calm.thermal.power_capped_fraction == 0.0 and calm.thermal.power_cap_reasons == {}


def test_warming_after_the_cool_down_is_a_recorded_condition(install_nvml, make_session, clock):
    """The cool-down starts the window near idle temperature, so the GPU warms inside it: that
    rise is recorded (thermal.temp_rise_c, a condition), not a reason to discard the run."""

    def warming(t: float) -> float:  # 4 C per second inside the window
        return 40.0 + 4.0 * max(t - T0, 0.0)

    rep = verdict(install_nvml, make_session, clock, FakeGpu("GPU-a", temperature_c=warming))
    assert statuses(rep)["temperature_steady"] == "condition"
    assert rep.validity.energy_valid is True and rep.validity.problems == []
    [condition] = rep.validity.conditions
    assert condition.startswith("The temperature of GPU-a rose 8.")  # whole-degree readings
    assert "C across the window (more than measurement.max_temp_rise_c=3 C" in condition
    assert rep.thermal.temp_rise_c == pytest.approx(8.0, abs=0.5)
    relaxed = verdict(
        install_nvml,
        make_session,
        clock,
        FakeGpu("GPU-a", temperature_c=lambda t: 40.0 + 4.0 * max(t - T0 - 2.0, 0.0)),
        max_temp_rise_c=10.0,
    )
    assert statuses(relaxed)["temperature_steady"] == "passed"
    assert relaxed.thermal.temp_rise_c < 10.0 and relaxed.validity.conditions == []


def test_temperature_rise_is_a_fitted_line():
    # whole-degree readings flipping between 40 and 41 at the end: a fitted rise well under 1 C
    times = [i * 0.1 for i in range(50)]
    temps = [40.0] * 49 + [41.0]
    assert temperature_rise_c(times, temps, 5.0) < 0.2
    assert temperature_rise_c([0.0, 1.0, 2.0], [40.0, 42.0, 44.0], 2.0) == pytest.approx(4.0)


def test_sampler_coverage_with_a_counter_is_a_condition(install_nvml, make_session, clock):
    # power readings fail in 6 of the ~21 samples: 71% coverage, but the energy comes from the
    # counter, so the verdict stands and the shortfall is recorded as a condition
    gpu = FakeGpu("GPU-a", failing_calls={"nvmlDeviceGetFieldValues": set(range(5, 11))})
    rep = verdict(install_nvml, make_session, clock, gpu)
    assert rep.energy.total_j == pytest.approx(200.0, abs=0.01)
    assert statuses(rep)["sampler_coverage"] == "condition"
    assert rep.validity.energy_valid is True and rep.validity.problems == []
    [condition] = rep.validity.conditions
    assert "in 15 of the 21 expected samples (71%, below measurement.min_sample_coverage=90%" in (
        condition
    )
    assert "comes from nvml_counter and is unaffected" in condition
    assert statuses(verdict(install_nvml, make_session, clock, gpu, min_sample_coverage=0.5))[
        "sampler_coverage"
    ] in ("passed",)


def window_of(method: str, times: list[float], window_s: float = 2.0) -> WindowResult:
    """A finished window of one device with power samples at ``times`` only."""
    samples = tuple(Sample(t, "GPU-p", power_w=80.0) for t in times)
    return WindowResult(
        start_s=0.0,
        end_s=window_s,
        window_s=window_s,
        devices=(DeviceEnergy("GPU-p", method, 80.0 * window_s),),
        ticks=tuple((s.time_s, (s,)) for s in samples),
        warnings=(),
        failure=None,
        cpu_package_j=None,
        cpu_null_reason=None,
    )


@pytest.mark.parametrize(
    "method, status", [("nvml_power", "failed"), ("nvml_counter", "condition")]
)
def test_sampler_coverage_is_judged_where_the_energy_is_the_samples(method, status):
    # the sampler thread fell behind: 10 of the 21 expected samples (a GPU without a counter
    # integrates its energy from them; with a counter they only feed peak power and the rest)
    window = window_of(method, [i * 0.2 for i in range(10)])
    validity, _ = assess(
        window,
        cfg=make_cfg(),
        device_type="cuda",
        unavailable_reason=None,
        idle=IdleBaseline(None, null_reason="not measured"),
        devices=[],
    )
    assert validity.checks["sampler_coverage"] == status
    assert validity.energy_valid is (status != "failed")
    said = validity.problems if status == "failed" else validity.conditions
    assert said[0].startswith("The power sampler has readings for GPU-p in 10 of the 21 expected")


@pytest.mark.parametrize(
    "idle_w, limit_mw, status, words",
    [
        (
            1.0,
            700_000,
            "failed",
            "1.0 W, is implausibly low (below measurement.idle_power_min_w=2 W)",
        ),
        (400.0, 700_000, "failed", "above measurement.idle_power_max_fraction=0.5 of its 700 W"),
        (400.0, None, "passed", None),
        (60.0, 700_000, "passed", None),
    ],
)
def test_idle_power_plausibility(
    install_nvml, make_session, clock, idle_w, limit_mw, status, words
):
    gpu = FakeGpu("GPU-a", power=Step(idle_w, 300.0, T0 + 1.0), power_limit_mw=limit_mw)
    rep = verdict(install_nvml, make_session, clock, gpu, idle_baseline_s=1.0)
    assert statuses(rep)["idle_power_plausible"] == status
    if words:
        assert words in rep.validity.problems[0]


L4 = dict(
    name="NVIDIA L4", power_limit_mw=72_000, control=FakeControl(power_range_mw=(40_000, 72_000))
)


@pytest.mark.parametrize(
    "idle_w, limit_mw, status",
    [(24.0, 72_000, "passed"), (24.0, 40_000, "passed"), (40.0, 40_000, "failed")],
)
def test_idle_power_is_judged_against_the_default_limit(
    install_nvml, make_session, clock, idle_w, limit_mw, status
):
    """An L4 (72 W by default) idles at 24 W whatever its limit: lowered to 40 W for a point of a
    power-limit sweep, its idle is as plausible as at 72 W. 40 W of idle is more than half of the
    default limit at any limit set."""
    gpu = FakeGpu("GPU-a", power=Step(idle_w, 35.0, T0 + 1.0), **L4)
    fake = install_nvml([gpu])
    fake.nvmlDeviceSetPowerManagementLimit(fake.nvmlDeviceGetHandleByIndex(0), limit_mw)
    s = make_session(make_cfg(idle_baseline_s=1.0))
    s.start()
    with s.window():
        clock.sleep(2.0)
    rep = s.measurement(output_tokens=10, requests=1)
    assert rep.devices[0].power_limit_w == limit_mw / 1000
    assert rep.devices[0].default_power_limit_w == 72.0
    assert statuses(rep)["idle_power_plausible"] == status
    if status == "failed":
        assert "of its 72 W default power limit" in rep.validity.problems[0]


def test_no_idle_baseline_is_not_checked(install_nvml, make_session, clock):
    rep = verdict(install_nvml, make_session, clock, idle_baseline_s=0.0)
    assert statuses(rep)["idle_power_plausible"] == "not checked"
    assert rep.validity.energy_valid is True


def test_cpu_run_has_no_verdict(install_nvml, make_session, clock):
    install_nvml([FakeGpu("GPU-a")])
    s = make_session(make_cfg(energy=EnergySource.auto), device_type="cpu", indices=None)
    s.start()
    with s.window():
        clock.sleep(1.0)
    rep = s.measurement(output_tokens=1, requests=1)
    assert dataclasses.asdict(rep.validity) == {
        "energy_valid": None,
        "problems": [],
        "checks": dict.fromkeys(CHECKS, "not checked"),
        "conditions": [],
        "per_device": {},
    }
    assert "device=cpu" in rep.null_reasons["validity.energy_valid"]


def test_replay_cannot_check_throttling_or_processes(make_session, clock, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("time_s,device,power_w\n0,dev0,100\n100,dev0,100\n")
    s = make_session(
        make_cfg(energy=EnergySource.replay, replay_trace=str(trace), idle_baseline_s=1.0),
        device_type="cpu",
        indices=None,
    )
    s.start()
    with s.window():
        clock.sleep(2.0)
    rep = s.measurement(output_tokens=100, requests=1)
    st = statuses(rep)
    assert st["throttling"] == st["other_processes"] == st["temperature_steady"] == "not checked"
    assert st["window_length"] == st["sampler_coverage"] == st["idle_power_plausible"] == "passed"
    assert rep.validity.energy_valid is True


def test_power_only_device_is_judged_too(install_nvml, make_session, clock):
    rep = verdict(
        install_nvml, make_session, clock, FakeGpu("GPU-p", architecture=4, power=Constant(80.0))
    )
    assert rep.energy.source == "nvml_power" and rep.validity.energy_valid is True


def test_a_mig_slice_is_judged_invalid(install_nvml, make_session, clock):
    """A MIG instance gets its whole GPU's energy (shared with the other slices): invalid, with the
    reason, where it used to be a warning and a valid verdict."""
    mig = "MIG-0e1e2e3e-aaaa-bbbb-cccc-000000000002"
    install_nvml([FakeGpu("GPU-a", migs=["MIG-0e1e2e3e-aaaa-bbbb-cccc-000000000001", mig])])
    s = make_session(make_cfg(), env={"CUDA_VISIBLE_DEVICES": mig})
    s.start()
    with s.window():
        clock.sleep(2.0)
    rep = s.measurement(output_tokens=10, requests=1)
    assert rep.energy.total_j == pytest.approx(200.0, abs=0.01)  # the whole GPU's
    assert statuses(rep)["whole_gpu"] == "failed"
    assert rep.validity.energy_valid is False
    [problem] = rep.validity.problems
    assert problem.startswith(f"torch device cuda:0 is MIG instance {mig}: NVML reports power")
    assert "whole GPU GPU-a" in problem

"""AMD energy through a real MeasurementSession handed the fake amdsmi: the counter times its own
resolution, a wrap mid-window, a misbehaving counter dropped for sampled power, and which power
reading is used. Every truth is planted in the double (its waveform's exact integral)."""

from __future__ import annotations

import pytest

from llem.devices.amd import init_amdsmi
from llem.testing.fake_amdsmi import FakeAmdGpu, FakeAmdSmi
from llem.testing.fake_pynvml import Constant, Square, Step

from .conftest import make_cfg

T0 = 1000.0  # the virtual clock's start


def measure(make_session, clock, fake: FakeAmdSmi, window_s: float = 3.0, **cfg):
    s = make_session(fake, make_cfg(**cfg))
    s.start()
    clock.sleep(0.123)
    a = clock.now()
    with s.window():
        clock.sleep(window_s)
    b = clock.now()
    return s.measurement(output_tokens=100, requests=1), a, b


def test_counter_energy_is_the_planted_integral_within_the_reported_bound(make_session, clock):
    wave = Square(150.0, 450.0, period_s=0.8, phase_s=T0 + 0.31)
    fake = FakeAmdSmi([FakeAmdGpu("GPU-a", power=wave, resolution_uj=15.259)], clock)
    m, a, b = measure(make_session, clock, fake)
    e = m.energy
    assert e.source == "amdsmi_counter"
    truth = wave.energy(a, b)
    assert e.total_j == pytest.approx(truth, abs=2 * 15.259e-6 + 1e-9)
    assert e.total_j_uncertainty is not None
    assert abs(e.total_j - truth) <= e.total_j_uncertainty
    assert e.warnings == []


def test_the_resolution_is_the_counters_own(make_session, clock):
    """A coarser planted step (1 mJ per tick) is what the J figure is multiplied by."""
    fake = FakeAmdSmi([FakeAmdGpu("GPU-a", power=Constant(200.0), resolution_uj=1000.0)], clock)
    m, _, _ = measure(make_session, clock, fake)
    assert m.energy.total_j == pytest.approx(600.0, abs=2e-3)
    reader = init_amdsmi(fake).reader(init_amdsmi(fake).gpus()[0])
    assert reader.sensor().counter_resolution_j == pytest.approx(1e-3)


@pytest.mark.parametrize("bits", [32, 64])
def test_a_wrap_mid_window_is_undone(make_session, clock, bits):
    wave = Step(200.0, 400.0, at_s=T0 + 1.5)
    gpu = FakeAmdGpu("GPU-w", power=wave, counter_bits=bits, counter_wraps_at_s=T0 + 1.7)
    fake = FakeAmdSmi([gpu], clock)
    m, a, b = measure(make_session, clock, fake)
    assert fake.accumulator(gpu, a) > fake.accumulator(gpu, b)  # it did wrap in the window
    assert m.energy.source == "amdsmi_counter"
    assert m.energy.total_j == pytest.approx(wave.energy(a, b), abs=1e-4)
    assert m.energy.warnings == []


def _assert_sampled_with_warning(m, a, b, wave, why: str) -> None:
    e = m.energy
    assert e.source == "amdsmi_power"
    assert any("GPU-x" in w and why in w and "sampled power" in w for w in e.warnings), e.warnings
    assert abs(e.total_j - wave.energy(a, b)) <= e.total_j_uncertainty


def test_a_counter_going_backwards_falls_back_to_sampled_power(make_session, clock):
    wave = Constant(300.0)
    gpu = FakeAmdGpu("GPU-x", power=wave, counter_backwards_at_s=T0 + 1.5)
    m, a, b = measure(make_session, clock, FakeAmdSmi([gpu], clock))
    _assert_sampled_with_warning(m, a, b, wave, "went backwards")


def test_a_flat_counter_under_load_falls_back_to_sampled_power(make_session, clock):
    wave = Constant(300.0)
    gpu = FakeAmdGpu("GPU-x", power=wave, counter_frozen_at_s=T0 + 0.5)
    m, a, b = measure(make_session, clock, FakeAmdSmi([gpu], clock))
    _assert_sampled_with_warning(m, a, b, wave, "stayed flat")


def test_without_current_socket_power_the_average_is_read_and_named(make_session, clock):
    wave = Constant(250.0)
    gpu = FakeAmdGpu("GPU-m", power=wave, current_socket_power=False, energy_counter=False)
    fake = FakeAmdSmi([gpu], clock)
    lib = init_amdsmi(fake)
    reader = lib.reader(lib.gpus()[0])
    assert (reader.power_key, reader.power_api) == ("average_socket_power", "average")
    assert reader.sensor().averaged_reading == "amdsmi average_socket_power"
    m, a, b = measure(make_session, clock, fake, sample_hz=20.0)
    assert m.energy.source == "amdsmi_power"
    assert any("amdsmi average_socket_power" in w for w in m.energy.warnings), m.energy.warnings
    assert m.energy.total_j == pytest.approx(wave.energy(a, b), rel=1e-3)


def test_with_current_socket_power_the_instant_reading_is_used(clock):
    fake = FakeAmdSmi([FakeAmdGpu("GPU-i", power=Step(100.0, 500.0, at_s=T0 + 0.5))], clock)
    lib = init_amdsmi(fake)
    reader = lib.reader(lib.gpus()[0])
    assert (reader.power_key, reader.power_api) == ("current_socket_power", "instant")
    clock.sleep(0.6)
    assert reader.read_power_w() == 500.0  # the planted draw now, not a 1 s mean


def test_samples_map_violations_onto_llems_throttle_reasons_and_list_other_processes(clock):
    gpu = FakeAmdGpu(
        "GPU-t",
        violations={"active_ppt_pwr": True, "active_hbm_thrm": True, "active_vr_thrm": True},
        processes=[(4242, 3 * 2**30)],
    )
    lib = init_amdsmi(FakeAmdSmi([gpu], clock))
    reader = lib.reader(lib.gpus()[0])
    sample = reader.read_sample(clock.now())
    assert sample.throttle_reasons == ("sw_power_cap", "sw_thermal_slowdown")  # VR unmapped
    assert (sample.temperature_c, sample.sm_clock_mhz, sample.memory_used_mb) == (45, 2100, 2048)
    (other,) = reader.other_processes(lambda pid: False)
    assert (other.pid, other.used_memory_mb) == (4242, 3072.0)
    assert reader.other_processes(lambda pid: pid == 4242) == []

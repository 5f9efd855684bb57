"""One measured window over a fake NVML GPU on a virtual clock: llem's real measurement session,
handed NVML over ``llem.testing.fake_pynvml`` (``init_nvml(fake)``) as its GPUs. The modelled
power source (``llem.testing.modelled_power``) and the truth harness
(``llem.testing.truth.harness``) both measure through it."""

from __future__ import annotations

from llem.config.schema import EnergySource, MeasurementConfig
from llem.devices.nvidia import init_nvml
from llem.measure import MeasurementSession
from llem.measure import devices as measure_devices
from llem.measure.idle import IdleCache
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, FakeNvml
from llem.vocabulary.workload import EngineStep


def measure_window(
    gpu: FakeGpu, clock: SteppingClock, *, sample_hz: float, until_s: float
) -> MeasurementSession:
    """The session after one window that opens 0.1 s after ``clock``'s now and closes at
    ``until_s`` (the clock's seconds), ``gpu`` sampled at ``sample_hz``."""
    saved_uuids = measure_devices.torch_device_uuids
    fake = FakeNvml([gpu], clock)
    measure_devices.torch_device_uuids = lambda indices: None
    try:
        session = _session(clock, sample_hz, fake)
        session.start()
        clock.sleep(0.1)
        with session.window():
            clock.sleep(until_s - clock.now())
        session.close()
    finally:
        measure_devices.torch_device_uuids = saved_uuids
    return session


def _session(clock: SteppingClock, sample_hz: float, fake: FakeNvml) -> MeasurementSession:
    cfg = MeasurementConfig(
        idle_baseline_s=0.0,
        sample_hz=sample_hz,
        cooldown_s=0.0,
        min_window_s=0.1,
        min_valid_window_s=0.1,
        energy=EnergySource.nvml,
    )
    return MeasurementSession(
        cfg,
        [0],
        "cuda",
        clock=clock,
        powercap_root="/nonexistent-powercap",
        cuda_sync=lambda: None,
        env={},
        idle_cache=IdleCache(),
        gpus=lambda: init_nvml(fake),
    )


def step_moved(s: EngineStep, by_s: float) -> EngineStep:
    """``s`` moved ``by_s`` seconds later."""
    return EngineStep(
        s.end_s + by_s,
        s.running,
        s.prefill_tokens,
        s.decode_tokens,
        None if s.start_s is None else s.start_s + by_s,
        s.shares,
    )

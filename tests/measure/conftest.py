from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llem.config.schema import EnergySource, MeasurementConfig
from llem.measure import MeasurementSession
from llem.measure import devices as measure_devices
from llem.measure.idle import IdleCache
from llem.measure.report import NOT_FIGURES
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, FakeNvml


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock()


@pytest.fixture(autouse=True)
def _no_torch_uuids(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA here: device mapping goes through CUDA_VISIBLE_DEVICES unless a test says else."""
    monkeypatch.setattr(measure_devices, "torch_device_uuids", lambda indices: None)


@pytest.fixture
def install_nvml(monkeypatch: pytest.MonkeyPatch, clock: SteppingClock) -> Callable[..., FakeNvml]:
    """``install_nvml([FakeGpu(...), ...], **kw)`` puts a fake pynvml in sys.modules."""

    def install(gpus: list[FakeGpu], **kw) -> FakeNvml:
        fake = FakeNvml(gpus, kw.pop("clock", clock), **kw)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install


def make_cfg(**overrides) -> MeasurementConfig:
    """A MeasurementConfig with test-sized durations (no idle baseline unless asked)."""
    values = dict(
        idle_baseline_s=0.0,
        sample_hz=10.0,
        cooldown_s=0.0,
        min_window_s=1.0,
        min_valid_window_s=1.0,
        energy=EnergySource.nvml,
    )
    values.update(overrides)
    return MeasurementConfig(**values)


@pytest.fixture
def idle_cache() -> IdleCache:
    """The test's own idle-baseline cache (the 'process' of one test)."""
    return IdleCache()


@pytest.fixture
def make_session(
    clock: SteppingClock, tmp_path: Path, idle_cache: IdleCache
) -> Callable[..., MeasurementSession]:
    """``make_session(cfg, indices=[0], device_type="cuda", env={})`` on the virtual clock; the
    sessions of one test share one idle cache, like the runs of one process."""
    created: list[MeasurementSession] = []

    def make(
        cfg: MeasurementConfig, indices=(0,), device_type: str = "cuda", env=None, **kw
    ) -> MeasurementSession:
        kw.setdefault("clock", clock)
        kw.setdefault("powercap_root", tmp_path / "no-powercap")
        kw.setdefault("cuda_sync", lambda: None)
        kw.setdefault("idle_cache", idle_cache)
        s = MeasurementSession(
            cfg,
            None if indices is None else list(indices),
            device_type,
            env={} if env is None else env,
            **kw,
        )
        created.append(s)
        return s

    yield make
    for s in created:
        s.close()


def assert_nulls_explained(rep) -> None:
    """Every null figure in a report has a reason (null with a reason, never 0)."""
    reasons = rep.null_reasons
    for key, value in rep.energy.items():
        if value is None and (key not in NOT_FIGURES or key == "other_processes"):
            assert reasons.get(f"energy.{key}"), f"energy.{key} is null without a reason"
    for uuid, value in rep.energy["per_device_j"].items():
        if value is None:
            assert reasons.get(f"energy.per_device_j.{uuid}")
    for key in ("max_temp_c", "throttled"):
        if rep.thermal[key] is None:
            assert reasons.get(f"thermal.{key}"), f"thermal.{key} is null without a reason"
    if rep.peak_device_used_mb is None:
        assert reasons.get("memory.peak_device_used_mb")
    for i, dev in enumerate(rep.devices):
        for key, value in dev.items():
            if value is None:
                assert reasons.get(f"devices[{i}].{key}")
    assert rep.energy["unavailable_reason"] or rep.energy["source"] != "unavailable"

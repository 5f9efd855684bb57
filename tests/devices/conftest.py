"""Fixtures for the AMD tests: a fake amdsmi on the virtual clock, handed to measurement sessions
(``gpus=lambda: init_amdsmi(fake)``) or installed as ``amdsmi`` for the paths that open the GPUs
themselves (``open_gpus``: GPU settings), with NVML failing to start as on an AMD machine."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvml
import pytest

from llem.config.schema import EnergySource, MeasurementConfig
from llem.devices.amd import init_amdsmi
from llem.measure import MeasurementSession
from llem.measure import devices as measure_devices
from llem.measure.idle import IdleCache
from llem.testing.clocks import SteppingClock
from llem.testing.fake_amdsmi import FakeAmdGpu, FakeAmdSmi
from llem.testing.fake_pynvml import FakeNvml


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock()


@pytest.fixture(autouse=True)
def _no_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ROCm torch here: devices are mapped through the visibility variables."""
    monkeypatch.setattr(measure_devices, "torch_device_uuids", lambda indices: None)
    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def amd_machine(monkeypatch: pytest.MonkeyPatch, clock: SteppingClock) -> Callable[..., FakeAmdSmi]:
    """``amd_machine([FakeAmdGpu(...)])``: ``amdsmi`` is the fake and NVML cannot start."""

    def install(gpus: list[FakeAmdGpu]) -> FakeAmdSmi:
        fake = FakeAmdSmi(gpus, clock)
        no_nvml = FakeNvml([], clock, init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        monkeypatch.setitem(sys.modules, "pynvml", no_nvml)
        monkeypatch.setitem(sys.modules, "amdsmi", fake)
        return fake

    return install


def make_cfg(**overrides: object) -> MeasurementConfig:
    values: dict[str, object] = dict(
        idle_baseline_s=0.0,
        sample_hz=10.0,
        cooldown_s=0.0,
        min_window_s=1.0,
        min_valid_window_s=1.0,
        energy=EnergySource.amdsmi,
    )
    values.update(overrides)
    return MeasurementConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def make_session(
    clock: SteppingClock, tmp_path: Path
) -> Iterator[Callable[..., MeasurementSession]]:
    """``make_session(fake, cfg, env={})``: a session on the virtual clock handed ``fake``."""
    created: list[MeasurementSession] = []

    def make(
        fake: FakeAmdSmi, cfg: MeasurementConfig, indices=(0,), env=None
    ) -> MeasurementSession:
        s = MeasurementSession(
            cfg,
            list(indices),
            "cuda",  # torch on ROCm calls its devices cuda
            env={} if env is None else env,
            clock=clock,
            powercap_root=tmp_path / "no-powercap",
            cuda_sync=lambda: None,
            idle_cache=IdleCache(),
            gpus=lambda: init_amdsmi(fake),
        )
        created.append(s)
        return s

    yield make
    for s in created:
        s.close()

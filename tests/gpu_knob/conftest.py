from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from llem.measure import devices as measure_devices
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, FakeNvml


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Each test's own llem cache directory (crash records land there)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("LLEM_CACHE_DIR", str(cache))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(measure_devices, "torch_device_uuids", lambda indices: None)
    return cache


@pytest.fixture
def install_nvml(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeNvml]:
    """``install_nvml([FakeGpu(...)])`` puts a fake pynvml in sys.modules."""

    def install(gpus: list[FakeGpu] | None = None, **kw) -> FakeNvml:
        fake = FakeNvml(gpus or [FakeGpu("GPU-aaaa")], kw.pop("clock", SteppingClock()), **kw)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install

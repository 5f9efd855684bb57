from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llem.config.schema import EnergySource, MeasurementConfig
from llem.devices.nvidia import Nvml, NvmlUnavailable, init_nvml
from llem.measure import MeasurementSession
from llem.measure import devices as measure_devices
from llem.measure.idle import IdleCache
from llem.measure.measurement import Measurement
from llem.result.figure import figure_specs
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
def gpu_double() -> dict[str, FakeNvml]:
    """The fake NVML a test installed (``install_nvml``), handed to its sessions."""
    return {}


@pytest.fixture
def install_nvml(gpu_double: dict[str, FakeNvml], clock: SteppingClock) -> Callable[..., FakeNvml]:
    """``install_nvml([FakeGpu(...), ...], **kw)``: the fake NVML that ``make_session``'s
    sessions receive (through ``init_nvml(fake)``; nothing is swapped in ``sys.modules``)."""

    def install(gpus: list[FakeGpu], **kw) -> FakeNvml:
        fake = FakeNvml(gpus, kw.pop("clock", clock), **kw)
        gpu_double["nvml"] = fake
        return fake

    return install


def gpus_of(gpu_double: dict[str, FakeNvml]) -> Callable[[], Nvml]:
    """The opener a session receives: the installed fake, or no NVML at all."""

    def opener() -> Nvml:
        fake = gpu_double.get("nvml")
        if fake is None:
            raise NvmlUnavailable("NVMLError_LibraryNotFound: NVML Shared Library Not Found")
        return init_nvml(fake)

    return opener


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
    clock: SteppingClock, tmp_path: Path, idle_cache: IdleCache, gpu_double: dict[str, FakeNvml]
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
        kw.setdefault("gpus", gpus_of(gpu_double))
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


def assert_nulls_explained(m: Measurement) -> None:
    """Every null figure of a measurement has a reason (null with a reason, never 0); so does
    every missing bound of a bounded figure."""
    sections = {
        "energy": m.energy,
        "thermal": m.thermal,
        "validity": m.validity,
        "boundary": m.boundary,
    }
    for where, section in sections.items():
        for name, spec in figure_specs(type(section)).items():
            _assert_figure_explained(m.null_reasons, where, section, name, spec)
    for key in m.null_reasons:  # and no reason stands beside a value
        where, _, name = key.partition(".")
        if where in sections:
            field, _, entry = name.partition(".")
            value = getattr(sections[where], field)
            assert (value.get(entry) if entry else value) is None, f"{key} has a value and a reason"
    assert m.peak_device_used_mb.value is not None or m.peak_device_used_mb.null_reason
    for i, dev in enumerate(m.devices):
        for key, value in dev.to_dict().items():
            if value is None:
                assert m.null_reasons.get(f"devices[{i}].{key}")
    assert m.energy.unavailable_reason or m.energy.source != "unavailable"


def _assert_figure_explained(reasons, where: str, section, name: str, spec) -> None:
    value = getattr(section, name)
    if spec.is_map:
        for key, v in value.items():
            if v is None:
                assert reasons.get(f"{where}.{name}.{key}"), f"{where}.{name}.{key}"
        return
    if value is None:
        assert reasons.get(f"{where}.{name}"), f"{where}.{name} is null without a reason"
    if spec.bound and getattr(section, spec.bound) is None:
        assert reasons.get(f"{where}.{spec.bound}"), f"{where}.{spec.bound}: no reason"

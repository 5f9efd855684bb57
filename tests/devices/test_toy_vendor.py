"""A toy third GPU vendor made of what CONTRIBUTING's "Adding a GPU vendor" lists, and nothing
else: a double of its package (``toysmi``, installed at the module boundary), a library module
(the only importer of that package: units, errors, visibility), a reader (energy counter, power,
a sample with its throttle reasons named) and one entry in ``VENDORS``. A measured window goes
through a real ``MeasurementSession`` that opens the GPUs as a run does (``open_gpus``), and the
energy planted in the double comes out, on the GPU the toy's own visibility variable selects, on
a device torch does not call cuda."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from llem.config.schema import EnergySource
from llem.devices import gpus as vendors
from llem.devices.gpu import (
    Gpu,
    GpuControlError,
    GpuFacts,
    Inventory,
    LibraryMissing,
    SensorSpec,
    error_text,
    visibility_shown,
)
from llem.devices.readings import Sample
from llem.measure import MeasurementSession
from llem.measure.idle import IdleCache
from llem.testing.fake_pynvml import Constant, Waveform
from llem.vocabulary.processes import OtherProcess

from .conftest import make_cfg

WATTS = (100.0, 250.0)  # the planted draw of the toy's GPU 0 and GPU 1


# ---------------------------------------------------------------- the double of the package
class ToyError(Exception):
    """toysmi's own error."""


def fake_toysmi(clock: Any, power: tuple[Waveform, ...], flags: tuple[str, ...]) -> Any:
    """``toysmi``: GPUs numbered 0.., an energy counter in mJ integrating each planted waveform
    on the session clock, power in mW, and the clock flags the part raises."""
    t0 = clock.now()
    pkg = types.ModuleType("toysmi")
    pkg.ToyError = ToyError  # type: ignore[attr-defined]
    pkg.init = lambda: None  # type: ignore[attr-defined]
    pkg.shutdown = lambda: None  # type: ignore[attr-defined]
    pkg.count = lambda: len(power)  # type: ignore[attr-defined]
    pkg.uuid = lambda i: f"TOY-{i}"  # type: ignore[attr-defined]
    pkg.energy_mj = lambda i: int(power[i].energy(t0, clock.now()) * 1000)  # type: ignore[attr-defined]
    pkg.power_mw = lambda i: int(power[i].power(clock.now()) * 1000)  # type: ignore[attr-defined]
    pkg.flags = lambda i: flags  # type: ignore[attr-defined]
    return pkg


# ---------------------------------------------------------------- the library module
_REASONS = {"PWR": "sw_power_cap", "HOT": "sw_thermal_slowdown"}  # toysmi's flags -> llem's


class ToyReader:
    """One toy GPU's readings (the reader module)."""

    has_counter = True
    power_api = "instant"

    def __init__(self, module: Any, index: int, uuid: str) -> None:
        self.m, self.i, self.uuid = module, index, uuid

    def sensor(self) -> SensorSpec:
        return SensorSpec(0.001, 0.0, 0.05, 5.0, 0.0, "toysmi's manual (a toy)")

    def read_counter_j(self) -> float:
        return float(self.m.energy_mj(self.i)) / 1000

    def read_power_w(self) -> float | None:
        return float(self.m.power_mw(self.i)) / 1000

    def read_sample(self, now: float) -> Sample:
        reasons = tuple(_REASONS.get(f, f"unknown_{f}") for f in self.m.flags(self.i))
        return Sample(now, self.uuid, power_w=self.read_power_w(), throttle_reasons=reasons)

    def read_temperature_c(self) -> float | None:
        return None

    def other_processes(self, is_own: Callable[[int], bool]) -> list[OtherProcess] | None:
        return None


class ToySmi:
    """The toy's ``GpuLibrary``."""

    vendor = "toy"
    api = "toysmi"
    visible_devices_var = "TOY_VISIBLE_DEVICES"
    torch_device_type = "toy"

    def __init__(self, module: Any) -> None:
        self.module = module

    def shutdown(self) -> None:
        self.module.shutdown()

    def is_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self.module.ToyError)

    def gpus(self) -> list[Gpu]:
        return [Gpu(i, i, self.module.uuid(i)) for i in range(self.module.count())]

    def name(self, gpu: Gpu) -> str:
        return "Toy 1"

    def partition_uuids(self, gpu: Gpu) -> list[str]:
        return []

    def reader(self, gpu: Gpu) -> ToyReader:
        return ToyReader(self.module, gpu.index, gpu.uuid)

    def visible(self, inv: Inventory, env: Mapping[str, str]) -> tuple[list[Any], str]:
        value = env.get("TOY_VISIBLE_DEVICES")
        if value is None:
            return [(g, None) for g in inv.gpus], visibility_shown("TOY_VISIBLE_DEVICES", None)
        picked = [int(e) for e in value.split(",") if re.fullmatch(r"\d+", e.strip())]
        kept = [(inv.gpus[i], None) for i in picked if i < len(inv.gpus)]
        return kept, visibility_shown("TOY_VISIBLE_DEVICES", value)

    def order_warning(self, inv: Inventory, env: Mapping[str, str]) -> str | None:
        return None

    def facts(self, gpu: Gpu) -> GpuFacts:
        return GpuFacts("Toy 1", 1024.0, None, None, {"memory_bandwidth_bytes_per_s": "a toy"})

    def snapshot(self) -> dict[str, Any]:
        return {"driver_version": "0.1", "gpus": [], "unavailable": {}}

    def persistence_off(self) -> list[int]:
        return []

    def _refuse(self, *args: Any) -> Any:
        raise GpuControlError("toysmi sets nothing", "not_supported")

    power_limit_w = enforced_power_limit_w = power_limit_range_w = set_power_limit_w = _refuse
    clock_mhz = supported_clocks_mhz = lock_clocks = reset_clocks = _refuse


def init_toysmi() -> ToySmi:
    """Import ``toysmi`` and start it (the vendor's opener)."""
    try:
        import toysmi  # type: ignore[import-not-found]
    except ImportError as exc:
        raise LibraryMissing(f"toysmi is not importable ({exc})") from exc
    try:
        toysmi.init()
    except toysmi.ToyError as exc:
        raise LibraryMissing(error_text(exc)) from exc
    return ToySmi(toysmi)


# ---------------------------------------------------------------- the test
@pytest.fixture
def toy_machine(monkeypatch: pytest.MonkeyPatch, clock) -> None:
    """A machine whose GPUs only toysmi sees: the double installed, its vendor line first."""
    pkg = fake_toysmi(clock, tuple(Constant(w) for w in WATTS), ("PWR", "XYZ"))
    monkeypatch.setitem(sys.modules, "toysmi", pkg)
    monkeypatch.setattr(vendors, "VENDORS", [("toy", init_toysmi), *vendors.VENDORS])


def test_a_window_on_a_toy_gpu_measures_its_planted_energy(toy_machine, clock, tmp_path) -> None:
    session = MeasurementSession(
        make_cfg(energy=EnergySource.auto, sample_hz=10.0),
        [0],
        ToySmi.torch_device_type,  # torch's word for the toy's GPUs, not cuda
        env={"TOY_VISIBLE_DEVICES": "1"},  # torch's device 0 is the toy's GPU 1
        clock=clock,
        powercap_root=tmp_path / "no-powercap",
        cuda_sync=lambda: None,
        idle_cache=IdleCache(),
    )
    assert session.preflight() == []
    session.start()
    a = clock.now()
    with session.window():
        clock.sleep(2.0)
    b = clock.now()
    m = session.measurement(output_tokens=100, requests=1)
    session.close()
    assert m.energy.source == "toysmi_counter"
    assert m.energy.total_j == pytest.approx(WATTS[1] * (b - a), abs=2e-3)
    assert [(d.uuid, d.vendor, d.vendor_index) for d in session.devices] == [("TOY-1", "toy", 1)]
    assert m.thermal.throttle_reasons == ["sw_power_cap", "unknown_XYZ"]
    assert m.thermal.power_capped_fraction == 1.0

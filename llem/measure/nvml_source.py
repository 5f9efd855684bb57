"""``NvmlSource``: the power source over the NVML devices a run measures (see
``llem.measure.energy.PowerSource``). It asks ``llem.measure.nvml`` for every reading and turns
NVML's errors during a window into ``SourceError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from llem.measure import uncertainty
from llem.measure.energy import OtherProcess, SourceError
from llem.measure.family import is_own
from llem.measure.nvml import Nvml, NvmlDevice, error_text
from llem.measure.sampler import Clock, Sample

T = TypeVar("T")


class NvmlSource:
    """Power source over a set of NVML devices."""

    kind = "nvml"

    def __init__(self, nvml: Nvml, devices: list[NvmlDevice]) -> None:
        self.nvml = nvml
        self.nvml_devices = devices
        self.uuids = [d.uuid for d in devices]
        self._by_uuid = {d.uuid: d for d in devices}

    def method(self, uuid: str) -> str | None:
        """How this device's energy is measured: nvml_counter, nvml_power, or None (cannot)."""
        dev = self._by_uuid[uuid]
        if dev.has_counter:
            return "nvml_counter"
        return "nvml_power" if dev.power_api else None

    def power_averaging_s(self, uuid: str) -> float:
        """1 s where power comes from nvmlDeviceGetPowerUsage (a trailing 1 s mean on Ampere and
        newer; taken as one on every GPU, which overstates the bound on older ones), 0 where the
        instantaneous field is read."""
        return uncertainty.POWER_AVERAGE_S if self._by_uuid[uuid].power_api == "average" else 0.0

    def setup_warnings(self) -> list[str]:
        out = []
        for d in self.nvml_devices:
            if not d.has_counter and d.power_api == "average":
                out.append(
                    f"{d.uuid}: no energy counter and no instantaneous power; energy is integrated "
                    "from nvmlDeviceGetPowerUsage, a ~1 s moving average that lags the real draw"
                )
        return out

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Exception as exc:
            if self.nvml.is_error(exc):
                raise SourceError(error_text(exc)) from exc
            raise

    def read_counters_j(self, clock: Clock) -> tuple[float, dict[str, float]]:
        """(instant, cumulative J per device with a counter). The instant is the midpoint of the
        reads: NVML does not say when within the call it sampled. Raises SourceError."""
        before = clock.now()
        values = self._guard(
            lambda: {d.uuid: d.read_counter_j() for d in self.nvml_devices if d.has_counter}
        )
        return (before + clock.now()) / 2, values

    def read_samples(self, now: float) -> list[Sample]:
        """One sample per device at ``now``. Raises SourceError when a primary reading fails."""
        return self._guard(lambda: [d.read_sample(now) for d in self.nvml_devices])

    def read_temperatures_c(self, now: float) -> dict[str, float | None]:
        return self._guard(lambda: {d.uuid: d.read_temperature_c() for d in self.nvml_devices})

    def other_processes(self) -> list[OtherProcess] | None:
        """Compute processes on the measured GPUs other than llem and its descendants (a vLLM
        engine's core and workers are llem's); None when no GPU can list them."""
        lists = [d.other_processes(is_own) for d in self.nvml_devices]
        if all(x is None for x in lists):
            return None
        return [p for x in lists if x is not None for p in x]

    def window_warnings(self, start: float, end: float) -> list[str]:
        return []

    def close(self) -> None:
        self.nvml.shutdown()

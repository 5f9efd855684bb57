"""``GpuSource``: the power source over the GPUs a run measures (see
``llem.measure.energy.PowerSource``), whatever their vendor. It asks each GPU's ``GpuReader``
(``llem.devices.gpu``) for every reading and turns the vendor library's errors during a window
into ``SourceError``. Its ``kind`` and the methods it names carry the library's tag: ``nvml``,
``nvml_counter``, ``nvml_power`` for NVIDIA; ``amdsmi``, ``amdsmi_counter``, ``amdsmi_power`` for
AMD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from llem.devices.gpu import GpuLibrary, GpuReader, SensorSpec, error_text
from llem.devices.readings import OtherProcess, Sample
from llem.measure.energy import SourceError
from llem.measure.family import is_own
from llem.measure.sampler import Clock

T = TypeVar("T")


class GpuSource:
    """Power source over a set of GPUs of one vendor library."""

    def __init__(self, lib: GpuLibrary, devices: list[GpuReader]) -> None:
        self.lib = lib
        self.kind = lib.api.lower()  # "nvml" | "amdsmi": what the idle baseline is cached under
        self.readers = devices
        self.uuids = [d.uuid for d in devices]
        self._by_uuid = {d.uuid: d for d in devices}

    def method(self, uuid: str) -> str | None:
        """How this device's energy is measured: ``<kind>_counter``, ``<kind>_power``, or None."""
        dev = self._by_uuid[uuid]
        if dev.has_counter:
            return f"{self.kind}_counter"
        return f"{self.kind}_power" if dev.power_api else None

    def sensor(self, uuid: str) -> SensorSpec:
        """The device's counter resolution and sensor accuracy, as its vendor documents them."""
        return self._by_uuid[uuid].sensor()

    def setup_warnings(self) -> list[str]:
        out = []
        for d in self.readers:
            if not d.has_counter and d.power_api == "average":
                out.append(
                    f"{d.uuid}: no energy counter and no instantaneous power; energy is integrated "
                    f"from {d.sensor().averaged_reading}, a ~{d.sensor().power_averaging_s:g} s "
                    "moving average that lags the real draw"
                )
        return out

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except Exception as exc:
            if self.lib.is_error(exc):
                raise SourceError(error_text(exc)) from exc
            raise

    def read_counters_j(self, clock: Clock) -> tuple[float, dict[str, float]]:
        """(instant, cumulative J per device with a counter). The instant is the midpoint of the
        reads: NVML does not say when within the call it sampled. Raises SourceError."""
        before = clock.now()
        values = self._guard(
            lambda: {d.uuid: d.read_counter_j() for d in self.readers if d.has_counter}
        )
        # a reader may drop a counter it finds misbehaving while reading it (amdsmi's)
        kept = {u: j for u, j in values.items() if self._by_uuid[u].has_counter}
        return (before + clock.now()) / 2, kept

    def read_samples(self, now: float) -> list[Sample]:
        """One sample per device at ``now``. Raises SourceError when a primary reading fails."""
        return self._guard(lambda: [d.read_sample(now) for d in self.readers])

    def read_temperatures_c(self, now: float) -> dict[str, float | None]:
        return self._guard(lambda: {d.uuid: d.read_temperature_c() for d in self.readers})

    def other_processes(self) -> list[OtherProcess] | None:
        """Compute processes on the measured GPUs other than llem and its descendants (a vLLM
        engine's core and workers are llem's); None when no GPU can list them."""
        lists = [d.other_processes(is_own) for d in self.readers]
        if all(x is None for x in lists):
            return None
        return [p for x in lists if x is not None for p in x]

    def window_warnings(self, start: float, end: float) -> list[str]:
        """What readers noticed during the window (an AMD counter dropped for sampled power)."""
        out: list[str] = []
        for d in self.readers:
            pending = getattr(d, "warnings", None)
            if pending:
                out.extend(pending)
                pending.clear()
        return out

    def close(self) -> None:
        self.lib.shutdown()

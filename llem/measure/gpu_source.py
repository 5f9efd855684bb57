"""``GpuSource``: the power source over the GPUs a run measures (see
``llem.measure.power_source.PowerSource``), whatever their vendor. It asks each GPU's ``GpuReader``
(``llem.devices.gpu``) for every reading and turns the vendor library's errors during a window
into ``SourceError``: ``DeviceReadError`` (with the other GPUs' readings) when some GPUs' own
reading failed, a plain ``SourceError`` when every GPU's did. Its ``kind`` and the methods it
names carry the library's tag: ``nvml``, ``nvml_counter``, ``nvml_power`` for NVIDIA; ``amdsmi``,
``amdsmi_counter``, ``amdsmi_power`` for AMD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from llem.devices.gpu import GpuLibrary, GpuReader, SensorSpec, error_text
from llem.devices.readings import Sample
from llem.measure.family import is_own
from llem.measure.power_source import DeviceReadError, SourceError
from llem.measure.sampler import Clock
from llem.vocabulary.model import WorkloadProcesses
from llem.vocabulary.processes import OtherProcess

T = TypeVar("T")


class GpuSource:
    """Power source over a set of GPUs of one vendor library."""

    def __init__(self, lib: GpuLibrary, devices: list[GpuReader]) -> None:
        self.lib = lib
        self.kind = lib.api.lower()  # "nvml" | "amdsmi": what the idle baseline is cached under
        self.readers = devices
        self.uuids = [d.uuid for d in devices]
        self._by_uuid = {d.uuid: d for d in devices}
        # processes outside llem's tree that are the run's own (a running server's)
        self.workload: WorkloadProcesses | None = None

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

    def _each(self, readers: list[GpuReader], read: Callable[[GpuReader], T]) -> dict[str, T]:
        """``read`` of each reader, by UUID. One GPU's library error does not stop the others:
        raises ``DeviceReadError`` with theirs when some failed, ``SourceError`` when every GPU
        of the source did."""
        got: dict[str, T] = {}
        failed: dict[str, str] = {}
        for d in readers:
            try:
                got[d.uuid] = read(d)
            except Exception as exc:
                if not self.lib.is_error(exc):
                    raise
                failed[d.uuid] = error_text(exc)
        if failed and len(failed) == len(self.readers):  # nothing left to measure
            raise SourceError("; ".join(f"{u}: {why}" for u, why in failed.items()))
        if failed:
            raise DeviceReadError(failed, got)
        return got

    def read_counters_j(self, clock: Clock) -> tuple[float, dict[str, float]]:
        """(instant, cumulative J per device with a counter). The instant is the midpoint of the
        reads: NVML does not say when within the call it sampled. Raises SourceError, or
        DeviceReadError with (instant, the other devices' counters) when some counters failed."""
        before = clock.now()
        try:
            values = self._each([d for d in self.readers if d.has_counter], _counter_j)
        except DeviceReadError as exc:
            kept = self._still_counting(exc.readings)
            raise DeviceReadError(exc.failed, ((before + clock.now()) / 2, kept)) from exc
        return (before + clock.now()) / 2, self._still_counting(values)

    def _still_counting(self, values: dict[str, float]) -> dict[str, float]:
        """``values`` less the counters a reader dropped while reading them (amdsmi's reader
        drops one it finds misbehaving: that GPU's energy comes from its power samples)."""
        return {u: j for u, j in values.items() if self._by_uuid[u].has_counter}

    def read_samples(self, now: float) -> list[Sample]:
        """One sample per device at ``now``. Raises SourceError when every device's primary
        reading fails, DeviceReadError with the other devices' samples when some do."""
        try:
            return list(self._each(self.readers, lambda d: d.read_sample(now)).values())
        except DeviceReadError as exc:
            raise DeviceReadError(exc.failed, list(exc.readings.values())) from exc

    def read_temperatures_c(self, now: float) -> dict[str, float | None]:
        return self._guard(lambda: {d.uuid: d.read_temperature_c() for d in self.readers})

    def other_processes(self) -> list[OtherProcess] | None:
        """Compute processes on the measured GPUs other than llem and its descendants (a vLLM
        engine's core and workers are llem's) and the ``workload``'s; None when no GPU can list
        them."""
        workload = self.workload
        lists = [
            d.other_processes(
                lambda pid: is_own(pid) or (workload is not None and workload.owns(pid))
            )
            for d in self.readers
        ]
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


def _counter_j(reader: GpuReader) -> float:
    return reader.read_counter_j()

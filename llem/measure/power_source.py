"""What the energy meter reads: a power source (NVML, amdsmi or a replayed trace) and how it fails.

A source over several devices raises ``DeviceReadError`` when some devices' own reading fails (the
healthy devices' readings ride along), and ``SourceError`` when it fails as a whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from llem.devices.gpu import SensorSpec
from llem.devices.readings import Sample
from llem.measure.sampler import Clock
from llem.vocabulary.processes import OtherProcess


class SourceError(Exception):
    """A power source failed while measuring; ``str(exc)`` is the reason."""


class DeviceReadError(SourceError):
    """Some devices' own reading failed, not all: ``failed`` maps each such device to its error;
    ``readings`` holds what the other devices read (the call's result without the failed ones)."""

    def __init__(self, failed: Mapping[str, str], readings: Any) -> None:
        super().__init__("; ".join(f"{u}: {why}" for u, why in failed.items()))
        self.failed = dict(failed)
        self.readings = readings


class PowerSource(Protocol):
    """What the meter needs from NVML or a replayed trace. Times are session-clock seconds."""

    kind: str  # "nvml", "replay:<path>": what the idle baseline is cached under
    uuids: list[str]

    # <api>_counter | <api>_power (api: nvml, amdsmi) | replay | None
    def method(self, uuid: str) -> str | None: ...

    def sensor(self, uuid: str) -> SensorSpec | None:
        """How exact the device's readings are (None: exact, a replayed trace)."""
        ...

    def read_counters_j(self, clock: Clock) -> tuple[float, dict[str, float]]:
        """(the instant they were read, cumulative J per device that has a counter)."""
        ...

    def read_samples(self, now: float) -> list[Sample]: ...

    def read_temperatures_c(self, now: float) -> dict[str, float | None]: ...

    def other_processes(self) -> list[OtherProcess] | None:
        """Other compute processes on the measured devices; None when the source cannot tell."""
        ...

    def window_warnings(self, start: float, end: float) -> list[str]: ...

    def close(self) -> None: ...

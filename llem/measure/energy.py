"""The energy window: read a power source at both edges, sample in between, compute joules.

Per device, energy over a window ``[start, end]`` (seconds on the session clock) comes from:

* ``nvml_counter``: the difference of NVML's total-energy counter (mJ since driver load) read at
  both edges. Exact up to the counter's own update period (tens of ms).
* ``nvml_power``: where the counter is unsupported (pre-Volta, some virtual GPUs), the trapezoid
  integral of the sampled power, with samples taken at both edges. Its error is at most
  ``dP / (2 * sample_hz)`` joules per step change ``dP`` of the power draw.
* ``replay``: the exact integral of a recorded trace (see ``llem.measure.replay``).

A source that fails mid-window (NVML raising) does not raise out of the window: sampling stops, the
failure is logged, and the window's energy is unavailable with the error as its reason.
"""

from __future__ import annotations

import bisect
import logging
import threading
from dataclasses import dataclass
from typing import Dict, List, Optional, Protocol, Sequence, Tuple

from llem.measure.nvml import SourceError
from llem.measure.rapl import RaplMeter
from llem.measure.sampler import Sample

log = logging.getLogger(__name__)


class PowerSource(Protocol):
    """What the meter needs from NVML or a replayed trace. Times are session-clock seconds."""

    uuids: List[str]

    def method(self, uuid: str) -> Optional[str]: ...  # nvml_counter | nvml_power | replay | None

    def read_counters_j(self, now: float) -> Dict[str, float]: ...  # cumulative J per device

    def read_samples(self, now: float) -> List[Sample]: ...

    def window_warnings(self, start: float, end: float) -> List[str]: ...


def integrate_linear(times: Sequence[float], values: Sequence[float], a: float, b: float) -> float:
    """Exact integral over [a, b] of the piecewise-linear curve through (times, values).

    Outside the first/last point the curve holds the end value. ``times`` must be non-decreasing;
    two points at the same time are a vertical step. With samples as the points this is the
    trapezoid rule, window edges included.
    """
    if not times or b <= a:
        return 0.0
    total = 0.0
    if a < times[0]:
        total += values[0] * (min(b, times[0]) - a)
    if b > times[-1]:
        total += values[-1] * (b - max(a, times[-1]))
    lo = max(bisect.bisect_right(times, a) - 1, 0)
    for i in range(lo, len(times) - 1):
        t0, t1 = times[i], times[i + 1]
        if t0 >= b:
            break
        if t1 <= a or t1 == t0:
            continue
        s, e = max(t0, a), min(t1, b)
        if e <= s:
            continue
        slope = (values[i + 1] - values[i]) / (t1 - t0)
        p_s = values[i] + slope * (s - t0)
        p_e = values[i] + slope * (e - t0)
        total += (p_s + p_e) / 2 * (e - s)
    return total


@dataclass(frozen=True)
class DeviceEnergy:
    """One device's energy over a window: joules, or None with ``null_reason``."""

    uuid: str
    method: Optional[str]
    energy_j: Optional[float]
    null_reason: Optional[str] = None


@dataclass(frozen=True)
class WindowResult:
    """What one window measured. Times are session-clock seconds; ``ticks`` are (time, samples)."""

    start_s: float
    end_s: float
    window_s: float
    devices: Tuple[DeviceEnergy, ...]
    ticks: Tuple[Tuple[float, Tuple[Sample, ...]], ...]
    warnings: Tuple[str, ...]
    failure: Optional[str]  # the source's error when it failed mid-window
    cpu_package_j: Optional[float]
    cpu_null_reason: Optional[str]

    @property
    def samples(self) -> List[Sample]:
        return [s for _, group in self.ticks for s in group]


class EnergyMeter:
    """begin() at the window start, tick(now) from the sampler thread, end() at the window end."""

    def __init__(self, source: Optional[PowerSource], rapl: Optional[RaplMeter]) -> None:
        self.source = source
        self.rapl = rapl
        self._lock = threading.Lock()
        self._ticks: List[Tuple[float, Tuple[Sample, ...]]] = []
        self._failure: Optional[str] = None
        self._start_counters: Dict[str, float] = {}
        self._start = 0.0

    def _fail(self, reason: str) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = reason
                log.warning(
                    "power source failed during the measured window; energy will be "
                    "reported unavailable: %s",
                    reason,
                )

    def _sample(self, now: float) -> None:
        if self.source is None or self._failure is not None:
            return
        try:
            samples = tuple(self.source.read_samples(now))
        except SourceError as exc:
            self._fail(str(exc))
            return
        with self._lock:
            self._ticks.append((now, samples))

    def begin(self, now: float) -> None:
        self._start = now
        if self.rapl is not None:
            self.rapl.begin()
        if self.source is None:
            return
        try:
            self._start_counters = self.source.read_counters_j(now)
        except SourceError as exc:
            self._fail(str(exc))
        self._sample(now)

    def tick(self, now: float) -> None:
        """Sampler callback: one sample per device, plus a RAPL poll (catches wraparounds)."""
        self._sample(now)
        if self.rapl is not None:
            self.rapl.poll()

    def end(self, now: float, sampler_error: Optional[BaseException] = None) -> WindowResult:
        warnings: List[str] = []
        if sampler_error is not None:
            self._fail(f"sampler thread stopped: {type(sampler_error).__name__}: {sampler_error}")
        with self._lock:  # a tick that raced the stop belongs after the window: drop it
            self._ticks = [t for t in self._ticks if t[0] <= now]
        end_counters: Dict[str, float] = {}
        if self.source is not None:
            self._sample(now)
            if self._failure is None:
                try:
                    end_counters = self.source.read_counters_j(now)
                except SourceError as exc:
                    self._fail(str(exc))
        devices = self._device_energy(now, end_counters)
        if self.source is not None and self._failure is None:
            warnings.extend(self.source.window_warnings(self._start, now))
        cpu_j: Optional[float] = None
        cpu_reason: Optional[str] = "RAPL not used"
        if self.rapl is not None:
            cpu_j, cpu_reason = self.rapl.end()
        with self._lock:
            ticks = tuple(sorted(self._ticks, key=lambda t: t[0]))
        return WindowResult(
            start_s=self._start,
            end_s=now,
            window_s=now - self._start,
            devices=devices,
            ticks=ticks,
            warnings=tuple(warnings),
            failure=self._failure,
            cpu_package_j=cpu_j,
            cpu_null_reason=cpu_reason,
        )

    def _device_energy(
        self, now: float, end_counters: Dict[str, float]
    ) -> Tuple[DeviceEnergy, ...]:
        if self.source is None:
            return ()
        out = []
        for uuid in self.source.uuids:
            method = self.source.method(uuid)
            if self._failure is not None:
                out.append(
                    DeviceEnergy(uuid, method, None, f"power source failed: {self._failure}")
                )
            elif method is None:
                out.append(
                    DeviceEnergy(
                        uuid, None, None, "device has neither an energy counter nor power readings"
                    )
                )
            elif uuid in end_counters and uuid in self._start_counters:
                out.append(
                    DeviceEnergy(uuid, method, end_counters[uuid] - self._start_counters[uuid])
                )
            else:
                pts = [
                    (t, float(s.power_w))
                    for t, group in self._ticks
                    for s in group
                    if s.device == uuid and s.power_w is not None
                ]
                pts.sort()
                if len(pts) < 2:
                    out.append(DeviceEnergy(uuid, method, None, "fewer than 2 power samples"))
                    continue
                times = [p[0] for p in pts]
                watts = [p[1] for p in pts]
                out.append(
                    DeviceEnergy(uuid, method, integrate_linear(times, watts, self._start, now))
                )
        return tuple(out)

"""The energy window: read a power source at both edges, sample in between, compute joules.

Per device, energy over a window ``[start, end]`` (seconds on the session clock) comes from:

* ``nvml_counter``: the difference of NVML's total-energy counter (mJ since driver load) read at
  both edges. Exact up to the counter's resolution and update period (see ``uncertainty``).
* ``nvml_power``: where the counter is unsupported (pre-Volta, some virtual GPUs), the trapezoid
  integral of the sampled power, with samples taken at both edges. Its error is at most
  ``dP / (2 * sample_hz)`` joules per step change ``dP`` of the power draw, plus the lag of the
  1 s average where power comes from ``nvmlDeviceGetPowerUsage`` (see ``uncertainty``).
* ``replay``: the exact integral of a recorded trace (see ``llem.measure.replay``).

Window edges: the counters are read first at the start and last at the end, so the window's
``start_s``/``end_s`` are the instants of the counter reads and ``window_s`` is the interval the
counter delta covers. The first sample is taken after the start read and the last one before the
end read.

Only a failure of the energy figure's own reading (the counter; power where there is no counter)
voids energy, and only that GPU's: a source over several GPUs raises ``DeviceReadError`` with the
healthy GPUs' readings, the meter keeps sampling them, and the failed GPU's energy is null with the
error as its reason (``WindowResult.device_failures``; the total is then null, naming it). Only when
the source fails as a whole (``SourceError``: every GPU, or a replayed trace) does sampling stop and
the window's energy become unavailable. Other readings fail into ``Sample.errors`` (see
``llem.devices.nvidia_reader``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from llem.devices.cpu_energy import CpuEnergy, RaplReader
from llem.devices.gpu import SensorSpec
from llem.devices.powercap import Snapshot
from llem.devices.readings import Sample
from llem.measure import uncertainty
from llem.measure.chassis import ChassisWindow
from llem.measure.integrate import integrate_linear
from llem.measure.power_source import DeviceReadError, PowerSource, SourceError
from llem.measure.rapl_reader import rapl_read_every_s
from llem.measure.sampler import Clock
from llem.vocabulary.processes import OtherProcess

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceEnergy:
    """One device's energy over a window: joules, or None with ``null_reason``."""

    uuid: str
    method: str | None
    energy_j: float | None
    null_reason: str | None = None
    uncertainty_j: float | None = None  # worst-case bound (see llem.measure.uncertainty)
    # what the bound is made of (J each; uncertainty_j is their sum)
    uncertainty_components: Mapping[str, float] = field(default_factory=dict)
    sensor: SensorSpec | None = None  # the GPU's resolution and accuracy (None: replay)


def is_counter(method: str | None) -> bool:
    """Energy from a counter (``nvml_counter``, ``amdsmi_counter``) or a trace's exact integral:
    the sampled power shape is scaled to add up to it."""
    return method is not None and (method.endswith("_counter") or method == "replay")


def is_sampled(method: str | None) -> bool:
    """Energy integrated from power samples (``nvml_power``, ``amdsmi_power``)."""
    return method is not None and method.endswith("_power")


@dataclass(frozen=True)
class WindowResult:
    """What one window measured. Times are session-clock seconds; ``ticks`` are (time, samples)."""

    start_s: float
    end_s: float
    window_s: float
    devices: tuple[DeviceEnergy, ...]
    ticks: tuple[tuple[float, tuple[Sample, ...]], ...]
    warnings: tuple[str, ...]
    failure: str | None  # the source's error when it failed mid-window
    cpu_package_j: float | None
    cpu_null_reason: str | None
    other_processes: tuple[OtherProcess, ...] | None = None  # None: the source cannot tell
    cpu: CpuEnergy | None = None  # each RAPL package and DRAM domain; None: RAPL not read
    # device -> why its own reading failed in the window (the others were still measured)
    device_failures: Mapping[str, str] = field(default_factory=dict)
    chassis: ChassisWindow | None = None  # the BMC's readings (None: not asked for)
    started_utc: datetime | None = None  # the wall-clock instant of the start edge

    @property
    def samples(self) -> list[Sample]:
        return [s for _, group in self.ticks for s in group]


class EnergyMeter:
    """begin() at the window start, tick(now) from the sampler thread, end() at the window end."""

    def __init__(self, source: PowerSource | None, rapl: RaplReader | None, clock: Clock) -> None:
        self.source = source
        self.rapl = rapl
        self._snapshots: list[Snapshot] = []
        self._read_every_s = rapl_read_every_s(rapl)
        self.clock = clock
        self._lock = threading.Lock()
        self._ticks: list[tuple[float, tuple[Sample, ...]]] = []
        self._failure: str | None = None
        self._device_failures: dict[str, str] = {}  # device -> first failure of its own reading
        self._start_counters: dict[str, float] = {}
        self._start = 0.0
        self._procs: dict[tuple[str, int], OtherProcess] | None = None

    def _fail(self, reason: str) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = reason
                log.warning(
                    "power source failed during the measured window; energy will be "
                    "reported unavailable: %s",
                    reason,
                )

    def _fail_devices(self, failed: Mapping[str, str], what: str) -> None:
        """Devices whose own reading (``what``) failed: their energy is null, the rest measured."""
        with self._lock:
            for uuid, why in failed.items():
                if uuid not in self._device_failures:
                    self._device_failures[uuid] = f"its {what} failed during the window ({why})"
                    log.warning(
                        "%s: %s failed during the measured window; its energy will be reported "
                        "unavailable, the other GPUs are still measured: %s",
                        uuid,
                        what,
                        why,
                    )

    def _sample(self, now: float) -> None:
        if self.source is None or self._failure is not None:
            return
        try:
            samples = tuple(self.source.read_samples(now))
        except DeviceReadError as exc:
            self._fail_devices(exc.failed, "power reading")
            samples = tuple(exc.readings)
        except SourceError as exc:
            self._fail(str(exc))
            return
        with self._lock:
            self._ticks.append((now, samples))

    def _note_processes(self) -> None:
        if self.source is None:
            return
        found = self.source.other_processes()
        if found is None:
            return
        if self._procs is None:
            self._procs = {}
        for p in found:
            self._procs.setdefault((p.device, p.pid), p)

    def _read_counters(self) -> tuple[float, dict[str, float]]:
        """The counters and the instant they were read (now, when the source has none)."""
        if self.source is None:
            return self.clock.now(), {}
        try:
            return self.source.read_counters_j(self.clock)
        except DeviceReadError as exc:
            self._fail_devices(exc.failed, "energy counter")
            instant, counters = exc.readings
            return float(instant), dict(counters)
        except SourceError as exc:
            self._fail(str(exc))
            return self.clock.now(), {}

    def begin(self) -> float:
        """Start edge: other processes, then the counters (their instant is the window start),
        then the first sample. Returns the start instant."""
        self._note_processes()
        if self.rapl is not None:
            self._snapshots = [self.rapl.snapshot()]
        self._start, self._start_counters = self._read_counters()
        self._sample(self.clock.now())
        return self._start

    def tick(self, now: float) -> None:
        """Sampler callback: one sample per device, plus a RAPL snapshot once the last one is
        ``_read_every_s`` old (so no counter can wrap twice between two snapshots)."""
        self._sample(now)
        if self.rapl is not None and self._snapshots:
            last = self._snapshots[-1].t_s
            if self.rapl.clock() - last >= self._read_every_s:
                self._snapshots.append(self.rapl.snapshot())

    def end(self, sampler_error: BaseException | None = None) -> WindowResult:
        """End edge, called once the sampler has stopped: the last sample, then the counters
        (their instant is the window end), then other processes."""
        warnings: list[str] = []
        if sampler_error is not None:
            self._fail(f"sampler thread stopped: {type(sampler_error).__name__}: {sampler_error}")
        if self.source is not None:
            self._sample(self.clock.now())
        end_counters: dict[str, float] = {}
        if self._failure is None:
            now, end_counters = self._read_counters()
        else:
            now = self.clock.now()
        cpu = self._cpu_energy()
        package = None if cpu is None else cpu.total("package")
        cpu_j = None if package is None else package.value_j
        cpu_reason = "RAPL not used" if package is None else package.reason
        self._note_processes()
        with self._lock:
            ticks = tuple(sorted(self._ticks, key=lambda t: t[0]))
        devices = self._device_energy(now, end_counters, ticks)
        if self.source is not None and self._failure is None:
            warnings.extend(self.source.window_warnings(self._start, now))
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
            other_processes=None if self._procs is None else tuple(self._procs.values()),
            cpu=cpu,
            device_failures=dict(self._device_failures),
        )

    def _cpu_energy(self) -> CpuEnergy | None:
        """Each RAPL domain's energy from the start snapshot to one taken now (None: not read)."""
        if self.rapl is None or not self._snapshots:
            return None
        self._snapshots.append(self.rapl.snapshot())
        return self.rapl.energy(*self._snapshots)

    def _device_energy(
        self,
        now: float,
        end_counters: dict[str, float],
        ticks: tuple[tuple[float, tuple[Sample, ...]], ...],
    ) -> tuple[DeviceEnergy, ...]:
        if self.source is None:
            return ()
        out = []
        for uuid in self.source.uuids:
            method = self.source.method(uuid)
            spec = self.source.sensor(uuid)
            pts = sorted(
                (t, float(s.power_w))
                for t, group in ticks
                for s in group
                if s.device == uuid and s.power_w is not None
            )
            if self._failure is not None:
                out.append(
                    DeviceEnergy(uuid, method, None, f"power source failed: {self._failure}")
                )
            elif uuid in self._device_failures:
                out.append(DeviceEnergy(uuid, method, None, self._device_failures[uuid]))
            elif method is None:
                out.append(
                    DeviceEnergy(
                        uuid, None, None, "device has neither an energy counter nor power readings"
                    )
                )
            elif uuid in end_counters and uuid in self._start_counters:
                joules = end_counters[uuid] - self._start_counters[uuid]
                parts = _counter_components(method, joules, pts, now - self._start, spec)
                bound = uncertainty.combine(parts)
                out.append(DeviceEnergy(uuid, method, joules, None, bound, parts, spec))
            elif len(pts) < 2:
                out.append(DeviceEnergy(uuid, method, None, "fewer than 2 power samples"))
            else:
                times = [p[0] for p in pts]
                watts = [p[1] for p in pts]
                joules = integrate_linear(times, watts, self._start, now)
                if spec is None:
                    raise TypeError(f"{method} energy of {uuid} needs the source's SensorSpec")
                parts = uncertainty.sampled_components(
                    times, watts, joules, now - self._start, spec
                )
                bound = uncertainty.combine(parts)
                out.append(DeviceEnergy(uuid, method, joules, None, bound, parts, spec))
        return tuple(out)


def _counter_components(
    method: str,
    joules: float,
    pts: list[tuple[float, float]],
    window_s: float,
    spec: SensorSpec | None,
) -> uncertainty.Components:
    """The bound of a counter delta: replay's rounding, or the counter's resolution and update
    period at the power of the edge samples (the window's mean power where there are none) and
    the sensor's accuracy."""
    if method == "replay" or spec is None:
        return uncertainty.replay_components(joules)
    mean_w = joules / window_s if window_s > 0 else 0.0
    first = pts[0][1] if pts else mean_w
    last = pts[-1][1] if pts else mean_w
    return uncertainty.counter_components(spec, first, last, joules, window_s)

"""Replay a recorded power trace as if it were a GPU (``measurement.energy=replay``).

The trace is a CSV with columns ``time_s`` (seconds), ``device`` (any name; it becomes the device's
UUID in results) and ``power_w`` (watts); an optional ``temperature_c`` column is replayed too. A
``timeseries.csv`` written by llem has these columns, so a run's trace can be played back.

Time 0 of the trace is the moment ``MeasurementSession.start()`` is called; the trace then runs on
the session's clock: the idle baseline covers trace time ``[0, idle_baseline_s]`` and the measured
window whatever trace time it lasted. Between points power is interpolated linearly; before the
first point and after the last the end value is held (a warning says when a window runs past the
trace's end).
Two rows of one device at the same time are a vertical step. Energy over a window is the exact
integral of that piecewise-linear curve, not an estimate from samples; the sampler still records the
replayed power so the timeseries looks like a real run's.
"""

from __future__ import annotations

import bisect
import csv
import math
from dataclasses import dataclass
from pathlib import Path

from llem.devices.gpu import SensorSpec
from llem.devices.readings import Sample
from llem.measure.integrate import integrate_linear
from llem.measure.sampler import Clock
from llem.vocabulary.processes import OtherProcess

REQUIRED_COLUMNS = ("time_s", "device", "power_w")


class TraceError(Exception):
    """The trace cannot be used; ``str(exc)`` says why (without naming the config key)."""


@dataclass(frozen=True)
class DeviceTrace:
    """One device's points (non-decreasing ``times_s``) and the integral from 0 to each point."""

    device: str
    times_s: tuple[float, ...]
    power_w: tuple[float, ...]
    temperature_c: tuple[float, ...] | None
    cumulative_j: tuple[float, ...]

    def power_at(self, t: float) -> float:
        return _interp(self.times_s, self.power_w, t)

    def energy_until(self, t: float) -> float:
        """Exact integral of power from trace time 0 to ``t`` (J)."""
        ts, ps = self.times_s, self.power_w
        if t <= ts[0]:
            return ps[0] * t  # before the first point its value is held (t >= 0 here)
        i = bisect.bisect_right(ts, t) - 1
        return self.cumulative_j[i] + integrate_linear(ts[i : i + 2], ps[i : i + 2], ts[i], t)


def _interp(ts: tuple[float, ...], vs: tuple[float, ...], t: float) -> float:
    if t <= ts[0]:
        return vs[0]
    if t >= ts[-1]:
        return vs[-1]
    i = bisect.bisect_right(ts, t) - 1
    t0, t1 = ts[i], ts[i + 1]
    return vs[i] + (vs[i + 1] - vs[i]) * (t - t0) / (t1 - t0)


def _number(row: dict[str, str], key: str, line: int) -> float:
    raw = (row.get(key) or "").strip()
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(f"line {line}: {key}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise TraceError(f"line {line}: {key}={raw!r} is not finite")
    return value


def load_trace(path: str) -> dict[str, DeviceTrace]:
    """Parse and check a trace file. Raises ``TraceError``."""
    p = Path(path)
    if not p.is_file():
        raise TraceError("file not found")
    with p.open(newline="") as fh:
        reader = csv.DictReader(fh)
        columns = [c.strip() for c in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            raise TraceError(
                f"missing column{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} (needs {', '.join(REQUIRED_COLUMNS)})"
            )
        reader.fieldnames = columns
        has_temp = "temperature_c" in columns
        points: dict[str, list[tuple[float, float, float | None]]] = {}
        for line, row in enumerate(reader, start=2):
            device = (row.get("device") or "").strip()
            if not device:
                raise TraceError(f"line {line}: device is empty")
            t = _number(row, "time_s", line)
            w = _number(row, "power_w", line)
            if w < 0:
                raise TraceError(f"line {line}: power_w={w} is negative")
            temp = None
            if has_temp and (row.get("temperature_c") or "").strip():
                temp = _number(row, "temperature_c", line)
            pts = points.setdefault(device, [])
            if pts and t < pts[-1][0]:
                raise TraceError(f"line {line}: time_s={t} goes back in time for device {device}")
            pts.append((t, w, temp))
    if not points:
        raise TraceError("no rows")
    return {d: _device_trace(d, pts) for d, pts in points.items()}


def _device_trace(device: str, pts: list[tuple[float, float, float | None]]) -> DeviceTrace:
    times = tuple(p[0] for p in pts)
    power = tuple(p[1] for p in pts)
    temps = [p[2] for p in pts]
    cum = [0.0]
    for i in range(1, len(times)):
        cum.append(cum[-1] + (power[i - 1] + power[i]) / 2 * (times[i] - times[i - 1]))
    if times[0] > 0:  # energy from 0 to the first point, with the first value held
        cum = [c + power[0] * times[0] for c in cum]
    elif times[0] < 0:  # the trace starts before 0: count from 0
        offset = integrate_linear(times, power, times[0], 0.0)
        cum = [c - offset for c in cum]
    known = tuple(t for t in temps if t is not None)
    temperature = known if len(known) == len(temps) else None  # only when every row has one
    return DeviceTrace(device, times, power, temperature, tuple(cum))


class ReplaySource:
    """A power source that plays a trace; trace time = session clock - ``origin_s``."""

    def __init__(self, traces: dict[str, DeviceTrace], origin_s: float, path: str = "") -> None:
        self.traces = traces
        self.origin_s = origin_s
        self.path = path
        self.uuids = list(traces)
        self.kind = f"replay:{path}"

    def method(self, uuid: str) -> str | None:
        return "replay"

    def sensor(self, uuid: str) -> SensorSpec | None:
        return None  # the trace's power is the power itself, integrated exactly

    def read_counters_j(self, clock: Clock) -> tuple[float, dict[str, float]]:
        """The trace's exact energy up to now (its 'counter'), and now."""
        now = clock.now()
        t = now - self.origin_s
        return now, {d: tr.energy_until(t) for d, tr in self.traces.items()}

    def other_processes(self) -> list[OtherProcess] | None:
        return None  # a trace knows nothing of processes

    def read_samples(self, now: float) -> list[Sample]:
        t = now - self.origin_s
        out = []
        for d, tr in self.traces.items():
            temp = _interp(tr.times_s, tr.temperature_c, t) if tr.temperature_c else None
            out.append(Sample(time_s=now, device=d, power_w=tr.power_at(t), temperature_c=temp))
        return out

    def read_temperatures_c(self, now: float) -> dict[str, float | None]:
        return {s.device: s.temperature_c for s in self.read_samples(now)}

    def window_warnings(self, start: float, end: float) -> list[str]:
        last = max(tr.times_s[-1] for tr in self.traces.values())
        t_end = end - self.origin_s
        if t_end > last:
            return [
                f"replay trace {self.path} ends at {last:.3f} s but the window ran to "
                f"{t_end:.3f} s; the last power value was held"
            ]
        return []

    def close(self) -> None:
        pass

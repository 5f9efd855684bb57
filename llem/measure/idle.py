"""The idle baseline: what the measured GPUs draw doing nothing, and when it was measured.

A GPU is only really idle before this process has loaded a model on it and while it is at its
idle temperature. So the baseline is measured once per process and set of devices, before the
first model load (``MeasurementSession.start()``), and kept in an ``IdleCache`` that the caller
holds (one per process: the run layer's); later runs in the same process (the points of an
in-process sweep, often with the model still loaded and the GPU still warm from the previous
window) pass the same cache and reuse the baseline instead of measuring a hot device.

With ``measurement.idle_max_age_s`` set, a baseline older than that is measured again, but only
once every device has cooled back to within ``measurement.idle_temp_margin_c`` of the temperature
it had when the baseline was taken (waiting at most ``measurement.cooldown_s``); if it does not
cool down in time the old baseline is kept, with a warning.

Across processes (one per sweep point), each GPU's coolest recent baseline is also kept on disk;
see ``llem.measure.idle_store``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from llem.measure.meter import WindowResult


class IdleSource(Enum):
    measured_this_run = "measured_this_run"
    reused_from_process = "reused_from_process"
    cached = "cached"  # from llem's cache directory, measured by an earlier process
    not_measured = "not_measured"


@dataclass(frozen=True)
class IdleBaseline:
    """Idle power summed over the measured devices (W) with its uncertainty bound (W), each
    device's idle power and mean idle temperature (C), and how and when it was measured.

    ``measured_clock_s`` is on the session clock (``time.perf_counter`` for real runs, the same
    for every session of a process); ``age_s`` is how old it was when this run's session started.
    """

    power_w: float | None
    temperature_c: Mapping[str, float] = field(default_factory=dict)
    null_reason: str | None = None
    window_s: float = 0.0
    per_device_w: Mapping[str, float] = field(default_factory=dict)
    power_uncertainty_w: float | None = None
    per_device_uncertainty_w: Mapping[str, float] = field(default_factory=dict)
    source: IdleSource = IdleSource.not_measured
    measured_at: str | None = None  # UTC, ISO 8601
    measured_clock_s: float | None = None
    age_s: float | None = None
    # the host's RAPL domains over the same idle window, W by kind (package, dram); a kind that
    # could not be read has its reason in cpu_null_reasons instead
    cpu_power_w: Mapping[str, float] = field(default_factory=dict)
    cpu_null_reasons: Mapping[str, str] = field(default_factory=dict)

    def cpu_idle_w(self, kind: str) -> tuple[float | None, str | None]:
        """The idle power (W) of the RAPL domains of ``kind``, or None and why."""
        if kind in self.cpu_power_w:
            return self.cpu_power_w[kind], None
        why = self.cpu_null_reasons.get(kind) or self.null_reason
        if why is None:
            why = f"the idle baseline ({self.source.value}) holds no {kind} power"
        return None, why

    def reused(self, now_s: float) -> IdleBaseline:
        age = None if self.measured_clock_s is None else now_s - self.measured_clock_s
        return replace(self, source=IdleSource.reused_from_process, age_s=age)


def baseline_from_window(
    res: WindowResult, uuids: Sequence[str], measured_at: str, clock_s: float
) -> IdleBaseline:
    """The baseline an idle window measured (``measured_at`` UTC, ``clock_s`` on the session
    clock, both at its start), or one with power None and the reason."""
    temps: dict[str, float] = {}
    for uuid in uuids:
        vals = [
            s.temperature_c for s in res.samples if s.device == uuid and s.temperature_c is not None
        ]
        if vals:
            temps[uuid] = sum(vals) / len(vals)
    if res.failure:
        why = f"NVML failed during the idle baseline ({res.failure})"
        return IdleBaseline(None, temps, why, res.window_s)
    bad = [
        f"{d.uuid}: {d.null_reason or f'read {d.energy_j} J'}"
        for d in res.devices
        if d.energy_j is None or d.energy_j <= 0
    ]
    if bad:
        return IdleBaseline(None, temps, "no idle energy for " + "; ".join(bad), res.window_s)
    per_device = {d.uuid: (d.energy_j or 0.0) / res.window_s for d in res.devices}
    bounds = {
        d.uuid: d.uncertainty_j / res.window_s for d in res.devices if d.uncertainty_j is not None
    }
    bound_w = sum(bounds.values()) if len(bounds) == len(res.devices) else None
    cpu_w, cpu_why = cpu_idle_power(res)
    return IdleBaseline(
        power_w=sum(per_device.values()),
        temperature_c=temps,
        window_s=res.window_s,
        per_device_w=per_device,
        power_uncertainty_w=bound_w,
        per_device_uncertainty_w=bounds,
        source=IdleSource.measured_this_run,
        measured_at=measured_at,
        measured_clock_s=clock_s,
        age_s=0.0,
        cpu_power_w=cpu_w,
        cpu_null_reasons=cpu_why,
    )


def cpu_baseline_from_window(
    res: WindowResult, measured_at: str, clock_s: float, no_gpu: str
) -> IdleBaseline:
    """The baseline of an idle window that read no GPU: the RAPL domains' power alone, the GPUs'
    null with ``no_gpu`` (never 0 W)."""
    read = baseline_from_window(res, (), measured_at, clock_s)
    return replace(read, power_w=None, null_reason=no_gpu, power_uncertainty_w=None)


CPU_KINDS = ("package", "dram")


def cpu_idle_power(res: WindowResult) -> tuple[dict[str, float], dict[str, str]]:
    """The RAPL packages' and DRAM's mean power (W) over an idle window, or why not, by kind."""
    powers: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for kind in CPU_KINDS:
        if res.cpu is None:
            reasons[kind] = "RAPL was not read during the idle baseline"
            continue
        total = res.cpu.total(kind)
        if total.value_j is None:
            reasons[kind] = total.reason or "not measured"
        elif res.cpu.duration_s <= 0:
            reasons[kind] = "the idle window has no length"
        else:
            powers[kind] = total.value_j / res.cpu.duration_s
    return powers, reasons


CacheKey = tuple[str, tuple[str, ...]]


class IdleCache:
    """Idle baselines by power source kind and measured devices. Whoever runs several sessions in
    one process holds one and passes it to each (``MeasurementSession(idle_cache=...)``)."""

    def __init__(self) -> None:
        self._baselines: dict[CacheKey, IdleBaseline] = {}

    def get(self, key: CacheKey) -> IdleBaseline | None:
        return self._baselines.get(key)

    def put(self, key: CacheKey, baseline: IdleBaseline) -> None:
        self._baselines[key] = baseline

    def clear(self) -> None:
        self._baselines.clear()

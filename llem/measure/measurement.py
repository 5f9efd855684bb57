"""``Measurement``: what one measured window gave, as frozen result sections.

Every figure is a value or None; each None has a one-line reason in ``null_reasons`` keyed by its
dotted result.json path (``energy.total_j``, ``thermal.max_temp_c``, ``validity.energy_valid``,
``devices[0].memory_bandwidth_bytes_per_s``). The sections are set through
``llem.result.figure.with_figures``, so a figure, its bound and its reason cannot disagree. Energy
figures are derived in ``llem.measure.energy_section``; the verdict on them in
``llem.measure.validity``.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llem.config.schema import MeasurementConfig
from llem.measure.boundary_section import boundary_section
from llem.measure.devices import DeviceInfo
from llem.measure.energy_section import Counts, energy_section
from llem.measure.idle import IdleBaseline
from llem.measure.meter import WindowResult
from llem.measure.temperature_rise import temperature_rises_c
from llem.measure.throttle import is_throttling, power_cap_shares, sort_reasons
from llem.measure.validity import assess
from llem.result import Energy, Figure, GpuRecord, Hardware, Thermal, Validity
from llem.result.boundary import Boundary
from llem.result.figure import with_figures


@dataclass(frozen=True)
class Measurement:
    """One window's sections for result.json (units in field names; see the README).

    ``energy``, ``thermal`` and ``validity`` are the result's sections as they are written;
    ``peak_device_used_mb`` is the figure ``memory.peak_device_used_mb``; ``hardware`` describes the
    measured GPUs (``devices``, in measurement order). ``null_reasons`` explains every null figure
    of the sections and of ``devices`` (``devices[i].<field>``) except ``peak_device_used_mb``,
    which carries its own.
    """

    energy: Energy
    thermal: Thermal
    validity: Validity
    peak_device_used_mb: Figure
    hardware: Hardware
    devices: tuple[DeviceInfo, ...]
    null_reasons: Mapping[str, str]
    window_s: float
    memory_bandwidth_bytes_per_s: float | None  # summed over the measured devices
    boundary: Boundary  # what the energy covers, per component (llem.measure.boundary_section)

    def memory_bandwidth_by_torch_index(self) -> dict[int, float | None]:
        """Each measured CUDA device's peak memory bandwidth (bytes/s) by its torch index."""
        return {
            d.torch_index: d.memory_bandwidth_bytes_per_s
            for d in self.devices
            if d.torch_index is not None
        }


def reading_failures(window: WindowResult) -> list[str]:
    """One warning per device whose NVML readings (other than energy) failed in some samples."""
    per_device = Counter(s.device for s in window.samples)
    failed: dict[str, Counter[str]] = {}
    first: dict[str, str] = {}
    for s in window.samples:
        for column, error in s.errors:
            failed.setdefault(s.device, Counter())[column] += 1
            first.setdefault(s.device, error)
    return [
        f"{device}: NVML failed to read "
        + ", ".join(f"{column} in {n}" for column, n in columns.items())
        + f" of {per_device[device]} samples ({first[device]}); those cells are empty, "
        "energy is unaffected"
        for device, columns in failed.items()
    ]


def _unavailable(window: WindowResult, reason: str | None, warnings: list[str]) -> str | None:
    """Why the window has no energy at all, or None when it has some."""
    if reason is None and window.failure is not None:
        reason = f"NVML failed during the measured window ({window.failure})"
        warnings.append(f"energy unavailable: {reason}")
    if reason is None and not window.devices:
        reason = "no device to measure"
    if reason is None and all(d.method is None for d in window.devices):
        reason = "no measured device has an energy counter or power readings"
    return reason


@dataclass(frozen=True)
class _NoReadings:
    """Each GPU-reading field's null reason when the window has no samples at all (``why`` says
    why there are none, in words about the GPU, not about energy); None when there are samples."""

    why: str | None

    def reason(self, what: str) -> str | None:
        return None if self.why is None else f"no GPU {what} ({self.why})"


def _thermal(window: WindowResult, none: _NoReadings) -> tuple[Thermal, dict[str, str]]:
    samples = window.samples
    temps = [s.temperature_c for s in samples if s.temperature_c is not None]
    readings = [s.throttle_reasons for s in samples if s.throttle_reasons is not None]
    names = sort_reasons(n for r in readings for n in r)
    capped, per_reason = power_cap_shares(readings)
    rises = temperature_rises_c(window)
    figures = {
        "max_temp_c": Figure.of(
            max(temps) if temps else None,
            none.reason("temperature readings") or "no temperature readings",
        ),
        "throttled": Figure.of(
            is_throttling(names) if readings else None,
            none.reason("clock throttle readings") or "no clock throttle readings",
        ),
        "power_capped_fraction": Figure.of(
            capped, none.reason("clock throttle readings") or "no clock throttle readings"
        ),
        "temp_rise_c": Figure.of(
            max(rises.values()) if rises else None,
            none.reason("temperature readings") or "fewer than 3 temperature readings per device",
        ),
    }
    section = Thermal(throttle_reasons=names, power_cap_reasons=per_reason)
    return with_figures(section, "thermal", figures)


def _peak_used(window: WindowResult, none: _NoReadings) -> Figure:
    used = [s.memory_used_mb for s in window.samples if s.memory_used_mb is not None]
    return Figure.of(
        max(used) if used else None, none.reason("memory readings") or "no device memory readings"
    )


def _device_reasons(devices: Sequence[DeviceInfo]) -> dict[str, str]:
    return {
        f"devices[{i}].{k}": dev.null_reasons.get(k, "not known")
        for i, dev in enumerate(devices)
        for k, v in dev.to_dict().items()
        if v is None
    }


def hardware(devices: Sequence[DeviceInfo]) -> Hardware:
    """The ``hardware`` section: this host and the measured GPUs."""
    names = sorted({d.name for d in devices})
    return Hardware(
        hostname=socket.gethostname(),
        gpu_model=" + ".join(names) if names else None,
        gpu_count=len(devices),
        gpus=[
            GpuRecord(
                torch_index=d.torch_index,
                vendor=d.vendor,
                vendor_index=d.vendor_index,
                uuid=d.uuid,
                name=d.name,
                memory_total_mb=d.memory_total_mb,
                power_limit_w=d.power_limit_w,
                default_power_limit_w=d.default_power_limit_w,
            )
            for d in devices
        ],
    )


def _bandwidth(devices: Sequence[DeviceInfo]) -> float | None:
    bws = [d.memory_bandwidth_bytes_per_s for d in devices]
    known = [b for b in bws if b is not None]
    return sum(known) if bws and len(known) == len(bws) else None


def build_measurement(
    window: WindowResult,
    *,
    cfg: MeasurementConfig,
    device_type: str,
    unavailable_reason: str | None,
    idle: IdleBaseline,
    devices: Sequence[DeviceInfo],
    setup_warnings: Sequence[str],
    counts: Counts,
    cpu_disabled_reason: str | None = None,
    no_gpu_reason: str | None = None,
    workload_said: str | None = None,
    gpus_absent: str | None = None,
) -> Measurement:
    """The ``Measurement`` of a finished window; ``counts`` is what was generated in it.

    ``no_gpu_reason`` (why there are no GPU readings at all, e.g. ``NVML unavailable: ...``)
    explains the null thermal and device-memory figures of a window without samples; without
    it they fall back to ``unavailable_reason``. ``workload_said`` says whose processes outside
    llem's tree were counted as the run's own (a running server's), in the other-processes
    check's sentence. ``gpus_absent``: why a run on no GPU has none here (a node leaves them out).
    """
    warnings = list(setup_warnings) + list(window.warnings) + reading_failures(window)
    unavailable_reason = _unavailable(window, unavailable_reason, warnings)
    energy, reasons = energy_section(
        window,
        unavailable_reason=unavailable_reason,
        idle=idle,
        counts=counts,
        warnings=warnings,
        cpu_disabled_reason=cpu_disabled_reason,
    )
    bounds, more = boundary_section(window, cfg, energy, reasons, idle, counts, gpus_absent)
    reasons.update(more)
    none = _NoReadings(
        (no_gpu_reason or unavailable_reason or "no samples") if not window.samples else None
    )
    thermal, thermal_reasons = _thermal(window, none)
    validity, validity_reasons = assess(
        window,
        cfg=cfg,
        device_type=device_type,
        unavailable_reason=unavailable_reason,
        idle=idle,
        devices=devices,
        workload_said=workload_said,
    )
    return Measurement(
        energy=energy,
        thermal=thermal,
        validity=validity,
        peak_device_used_mb=_peak_used(window, none),
        hardware=hardware(devices),
        devices=tuple(devices),
        null_reasons={**reasons, **thermal_reasons, **_device_reasons(devices), **validity_reasons},
        window_s=window.window_s,
        memory_bandwidth_bytes_per_s=_bandwidth(devices),
        boundary=bounds,
    )

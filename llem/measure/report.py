"""The frozen result of a measured window, and how its figures are derived.

Every figure is a number or None; each None has a one-line reason in ``null_reasons`` keyed by its
dotted path (``energy.total_j``, ``thermal.max_temp_c``, ``memory.peak_device_used_mb``,
``devices[0].memory_bandwidth_bytes_per_s``, ``validity.energy_valid``). A window whose energy
reads 0 J is reported as a warning with null energy, never as 0 J.

Each energy figure ``X`` has a worst-case bound ``X_uncertainty`` in the same unit (see
``llem.measure.uncertainty``): the true value lies within ``X +/- X_uncertainty`` as far as the
source's own limits go. ``validity`` says whether the figure can be trusted at all (see
``llem.measure.validity``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llem.config.schema import MeasurementConfig
from llem.measure import uncertainty
from llem.measure.devices import DeviceInfo
from llem.measure.energy import WindowResult
from llem.measure.idle import IdleBaseline
from llem.measure.throttle import decode_reasons, is_throttling, sort_reasons
from llem.measure.validity import Validity, assess

ENERGY_KEYS = (
    "source",
    "unavailable_reason",
    "window_s",
    "total_j",
    "per_device_j",
    "idle_power_w",
    "idle_adjusted_j",
    "j_per_output_token",
    "j_per_request",
    "avg_power_w",
    "peak_power_w",
    "warnings",
    "cpu_source",
    "cpu_package_j",
    "cpu_unavailable_reason",
    "j_per_total_token",  # J per input + output token
    "output_tokens_per_j",
    "wh_per_1k_requests",  # AI Energy Score's unit: watt-hours per 1,000 requests
    "total_j_uncertainty",
    "per_device_j_uncertainty",
    "idle_power_w_uncertainty",
    "idle_adjusted_j_uncertainty",
    "j_per_output_token_uncertainty",
    "j_per_total_token_uncertainty",
    "j_per_request_uncertainty",
    "wh_per_1k_requests_uncertainty",
    "avg_power_w_uncertainty",
    "output_tokens_per_j_uncertainty",
    "uncertainty_method",
    "idle_source",  # measured_this_run | reused_from_process | not_measured
    "idle_measured_at",  # UTC ISO 8601
    "idle_age_s",  # age of the baseline when this run's session started
    "other_processes",  # [{device, pid, used_memory_mb}], None when the source cannot tell
)
NOT_FIGURES = {
    "source",
    "unavailable_reason",
    "warnings",
    "cpu_source",
    "cpu_unavailable_reason",
    "per_device_j",
    "per_device_j_uncertainty",
    "uncertainty_method",
    "idle_source",
    "idle_measured_at",
    "idle_age_s",
    "other_processes",
}


@dataclass(frozen=True)
class MeasurementReport:
    """Energy, thermal and device figures of one window (units in key names; see the README)."""

    energy: dict[str, Any]
    thermal: dict[str, Any]
    peak_device_used_mb: float | None
    devices: list[dict[str, Any]]
    null_reasons: dict[str, str]
    window_s: float
    memory_bandwidth_bytes_per_s: float | None  # summed over the measured devices
    validity: Validity

    def to_dict(self) -> dict[str, Any]:
        return {
            "energy": self.energy,
            "thermal": self.thermal,
            "peak_device_used_mb": self.peak_device_used_mb,
            "devices": self.devices,
            "validity": self.validity.to_dict(),
            "null_reasons": self.null_reasons,
        }


def _ratio(
    num: float | None, den: float, what: str, why_num: str | None
) -> tuple[float | None, str | None]:
    if num is None:
        return None, why_num
    if den <= 0:
        return None, f"no {what}"
    return num / den, None


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


def _wh_per_1k(j_per_request: float | None) -> float | None:
    """J per request → Wh per 1,000 requests (x 1000 / 3600)."""
    return None if j_per_request is None else j_per_request * 1000.0 / 3600.0


def build_report(
    window: WindowResult,
    *,
    cfg: MeasurementConfig,
    device_type: str,
    unavailable_reason: str | None,
    idle: IdleBaseline,
    devices: Sequence[DeviceInfo],
    setup_warnings: Sequence[str],
    output_tokens: int,
    input_tokens: int,
    requests: int,
    cpu_disabled_reason: str | None = None,
) -> MeasurementReport:
    reasons: dict[str, str] = {}
    warnings = list(setup_warnings) + list(window.warnings) + reading_failures(window)
    e: dict[str, Any] = dict.fromkeys(ENERGY_KEYS)
    e["window_s"] = window.window_s
    e["per_device_j"] = {}
    e["per_device_j_uncertainty"] = {}
    if unavailable_reason is None and window.failure is not None:
        unavailable_reason = f"NVML failed during the measured window ({window.failure})"
        warnings.append(f"energy unavailable: {unavailable_reason}")
    if unavailable_reason is None and not window.devices:
        unavailable_reason = "no device to measure"
    if unavailable_reason is None and all(d.method is None for d in window.devices):
        unavailable_reason = "no measured device has an energy counter or power readings"
    total: float | None = None
    total_u: float | None = None
    why_total: str | None = unavailable_reason
    if unavailable_reason is not None:
        e["source"] = "unavailable"
        e["unavailable_reason"] = unavailable_reason
    else:
        methods = {d.method for d in window.devices}
        e["source"] = (
            "replay"
            if "replay" in methods
            else "nvml_power"
            if "nvml_power" in methods
            else "nvml_counter"
        )
        e["uncertainty_method"] = uncertainty.METHOD[e["source"]]
        missing = []
        for d in window.devices:
            j = d.energy_j
            if j is not None and j <= 0:
                warnings.append(
                    f"{d.uuid}: energy read {j:.3f} J over the {window.window_s:.3f} s "
                    "window (the counter did not advance; window shorter than its "
                    "update period?); energy figures left null"
                )
                reasons[f"energy.per_device_j.{d.uuid}"] = f"energy read {j:.3f} J (not credible)"
                j = None
            elif j is None:
                reasons[f"energy.per_device_j.{d.uuid}"] = d.null_reason or "not measured"
            e["per_device_j"][d.uuid] = j
            e["per_device_j_uncertainty"][d.uuid] = None if j is None else d.uncertainty_j
            if j is None:
                missing.append(f"{d.uuid}: {reasons[f'energy.per_device_j.{d.uuid}']}")
        if missing:
            why_total = "no energy for " + "; ".join(missing)
        else:
            total = sum(e["per_device_j"].values())
            bounds = list(e["per_device_j_uncertainty"].values())
            total_u = None if any(b is None for b in bounds) else sum(bounds)
    e["total_j"], e["total_j_uncertainty"] = total, total_u
    e["idle_power_w"] = idle.power_w
    e["idle_power_w_uncertainty"] = idle.power_uncertainty_w
    e["idle_source"] = idle.source.value
    e["idle_measured_at"] = idle.measured_at
    e["idle_age_s"] = idle.age_s
    idle_adj = None
    why_idle_adj = why_total or idle.null_reason
    if total is not None and idle.power_w is not None:
        idle_adj = total - idle.power_w * window.window_s
        if total_u is not None and idle.power_uncertainty_w is not None:
            e["idle_adjusted_j_uncertainty"] = total_u + idle.power_uncertainty_w * window.window_s
        if idle_adj < 0:
            warnings.append(
                f"idle-adjusted energy is negative ({idle_adj:.3f} J): the window drew "
                "less than the idle baseline"
            )
    e["idle_adjusted_j"] = idle_adj
    all_tokens = output_tokens + input_tokens
    e["j_per_output_token"], why_tok = _ratio(total, output_tokens, "output tokens", why_total)
    e["j_per_total_token"], why_all = _ratio(total, all_tokens, "tokens", why_total)
    e["j_per_request"], why_req = _ratio(total, requests, "requests", why_total)
    e["avg_power_w"], why_avg = _ratio(total, window.window_s, "window time", why_total)
    e["j_per_output_token_uncertainty"] = uncertainty.ratio_bound(total_u, output_tokens)
    e["j_per_total_token_uncertainty"] = uncertainty.ratio_bound(total_u, all_tokens)
    e["j_per_request_uncertainty"] = uncertainty.ratio_bound(total_u, requests)
    e["avg_power_w_uncertainty"] = uncertainty.ratio_bound(total_u, window.window_s)
    e["wh_per_1k_requests"] = _wh_per_1k(e["j_per_request"])
    e["wh_per_1k_requests_uncertainty"] = _wh_per_1k(e["j_per_request_uncertainty"])
    why_per_j = why_total
    if total is not None and output_tokens > 0:
        e["output_tokens_per_j"] = output_tokens / total
        e["output_tokens_per_j_uncertainty"] = uncertainty.inverse_ratio_bound(
            output_tokens, total, total_u
        )
    elif total is not None:
        why_per_j = "no output tokens"
    e["peak_power_w"] = None
    why_peak = unavailable_reason
    if unavailable_reason is None:
        sums = [
            sum(s.power_w or 0.0 for s in g)
            for _, g in window.ticks
            if g and all(s.power_w is not None for s in g)
        ]
        e["peak_power_w"] = max(sums) if sums else None
        why_peak = None if sums else "no power samples"
    if window.other_processes is not None:
        e["other_processes"] = [p.to_dict() for p in window.other_processes]
    e["warnings"] = warnings
    if cpu_disabled_reason is not None:
        e["cpu_source"], e["cpu_unavailable_reason"] = "unavailable", cpu_disabled_reason
    elif window.cpu_package_j is not None:
        e["cpu_source"], e["cpu_package_j"] = "rapl", window.cpu_package_j
    else:
        e["cpu_source"], e["cpu_unavailable_reason"] = "unavailable", window.cpu_null_reason
    no_bound = (
        f"the {e['source']} source gives no bound for some device"
        if unavailable_reason is None
        else None
    )
    figure_reasons = {
        "total_j": why_total,
        "idle_power_w": idle.null_reason or unavailable_reason,
        "idle_adjusted_j": why_idle_adj,
        "j_per_output_token": why_tok,
        "j_per_total_token": why_all,
        "j_per_request": why_req,
        "wh_per_1k_requests": why_req,
        "avg_power_w": why_avg,
        "output_tokens_per_j": why_per_j,
        "peak_power_w": why_peak,
        "cpu_package_j": e["cpu_unavailable_reason"],
    }
    for key in list(figure_reasons):
        if key + "_uncertainty" in e:
            figure_reasons[key + "_uncertainty"] = figure_reasons[key] or no_bound
    figure_reasons["output_tokens_per_j_uncertainty"] = why_per_j or (
        "the energy bound is as large as the energy" if total is not None else None
    )
    for key, value in e.items():
        if value is None and key not in NOT_FIGURES:
            reasons[f"energy.{key}"] = figure_reasons.get(key) or "not measured"
    if e["idle_source"] == "not_measured":
        reasons["energy.idle_measured_at"] = idle.null_reason or "not measured"
    if e["other_processes"] is None:
        reasons["energy.other_processes"] = (
            unavailable_reason or f"the {e['source']} source cannot list GPU processes"
        )

    samples = window.samples
    temps = [s.temperature_c for s in samples if s.temperature_c is not None]
    masks = [s.throttle_mask for s in samples if s.throttle_mask is not None]
    names = sort_reasons(n for m in masks for n in decode_reasons(m))
    no_samples = unavailable_reason if not samples else None
    thermal = {
        "max_temp_c": max(temps) if temps else None,
        "throttled": is_throttling(names) if masks else None,
        "throttle_reasons": names,
    }
    if not temps:
        reasons["thermal.max_temp_c"] = no_samples or "no temperature readings"
    if not masks:
        reasons["thermal.throttled"] = no_samples or "no clock throttle readings"
    used = [s.memory_used_mb for s in samples if s.memory_used_mb is not None]
    peak_used = max(used) if used else None
    if peak_used is None:
        reasons["memory.peak_device_used_mb"] = no_samples or "no device memory readings"
    dev_dicts = []
    for i, dev in enumerate(devices):
        dd = dev.to_dict()
        for k, v in dd.items():
            if v is None:
                reasons[f"devices[{i}].{k}"] = dev.null_reasons.get(k, "not known")
        dev_dicts.append(dd)
    bws = [dev.memory_bandwidth_bytes_per_s for dev in devices]
    known_bws = [b for b in bws if b is not None]
    bw = sum(known_bws) if bws and len(known_bws) == len(bws) else None
    validity = assess(
        window, cfg=cfg, unavailable_reason=unavailable_reason, idle=idle, devices=devices
    )
    if validity.energy_valid is None:
        reasons["validity.energy_valid"] = (
            f"the run is on device={device_type}: no GPU energy to judge"
            if device_type != "cuda" and e["source"] == "unavailable"
            else validity.null_reason or "no energy was measured"
        )
    return MeasurementReport(
        energy=e,
        thermal=thermal,
        peak_device_used_mb=peak_used,
        devices=dev_dicts,
        null_reasons=reasons,
        window_s=window.window_s,
        memory_bandwidth_bytes_per_s=bw,
        validity=validity,
    )

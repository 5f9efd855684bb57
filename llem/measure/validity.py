"""Is a window's energy figure valid? One verdict, the checks behind it, one sentence per problem.

``assess()`` runs every check on a finished window and returns a ``Validity``:

* ``window_length``: the window lasted at least ``measurement.min_valid_window_s`` (NVML's counter
  updates about every 100 ms; windows under ~2 s read low).
* ``sampler_coverage``: every device has power readings in at least ``min_sample_coverage`` of the
  expected samples (``window_s * sample_hz + 1``: the ticks plus the two edge samples). Judged only
  where the energy is integrated from those samples (``nvml_power``); with an energy counter a
  shortfall is a ``condition``.
* ``throttling``: no hardware or thermal slowdown during the window (``SLOWDOWN_REASONS``); a power
  cap alone (``sw_power_cap``) is a ``condition``, recorded and not judged (not checked without
  throttle readings, e.g. replay).
* ``other_processes``: no other compute process on a measured GPU (not checked where the source
  cannot list processes, e.g. replay or a driver that refuses). llem's own processes and their
  descendants are the run's, and so are a running server's (``workload_said`` says whose).
* ``temperature_steady``: per device, the least-squares line through the window's temperature
  readings rises by at most ``measurement.max_temp_rise_c`` from the window's start to its end (not
  checked with fewer than 3 readings); a larger rise is a ``condition``, recorded as
  ``thermal.temp_rise_c``, never a failure. The cool-down brings every window's start near idle
  temperature, so that each configuration and repeat is measured from the same state; the GPU then
  warms inside the window, and that warming (leakage power grows with temperature) belongs to the
  configuration's energy. A linear fit, not last-minus-first, so NVML's whole-degree readings do
  not flip the outcome on one reading.
* ``idle_power_plausible``: each device's idle power is at least ``idle_power_min_w`` and, where its
  power limit is known, at most ``idle_power_max_fraction`` of its *default* power limit (NVML's
  ``nvmlDeviceGetPowerManagementDefaultLimit``), not of the limit set for the run: idle draw does
  not depend on the cap (not checked without a baseline).
* ``energy_nonzero``: no device's energy read 0 J (or less).
* ``energy_read``: every measured GPU's own energy reading (its counter; its power where it has no
  counter) worked through the window. One that failed leaves that GPU's energy, and so the total,
  null; the other GPUs are still measured and reported.
* ``whole_gpu``: no measured device is a MIG instance: NVML's power and energy are the whole
  GPU's, shared with its other instances, so a slice's share cannot be measured (not checked
  without NVML devices, e.g. replay).

``energy_valid`` is False when any check failed, True when none did (checks that were not checked,
and conditions, do not count against it; a condition's sentence goes to ``validity.conditions``),
and None when no energy was measured (CPU runs, energy unavailable), with the reason under
``validity.energy_valid``.

The checks judged per GPU (sampler coverage, throttling, a steady temperature, a plausible idle
power, a nonzero energy, a read energy) also give each GPU's own outcome
(``validity.per_device``: ``{uuid: {check: status}}``), and each of their sentences names the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from llem.config.schema import MeasurementConfig
from llem.devices.gpu import on_gpu
from llem.measure.check_outcome import NOT_CHECKED as _NOT_CHECKED
from llem.measure.check_outcome import PASSED as _PASSED
from llem.measure.check_outcome import Check, CheckOutcome, PerDevice, by_device, combined
from llem.measure.check_outcome import outcome as _outcome
from llem.measure.devices import DeviceInfo
from llem.measure.idle import IdleBaseline
from llem.measure.meter import WindowResult, is_sampled
from llem.measure.temperature_rise import temperature_rises_c
from llem.measure.throttle import (
    POWER_CAP_REASONS,
    SLOWDOWN_REASONS,
    power_cap_shares,
    sort_reasons,
)
from llem.result import Figure, Validity
from llem.result.figure import with_figures

CHECKS = (
    "window_length",
    "sampler_coverage",
    "throttling",
    "other_processes",
    "temperature_steady",
    "idle_power_plausible",
    "energy_nonzero",
    "whole_gpu",
    "energy_read",
)


def _window_length(window: WindowResult, cfg: MeasurementConfig) -> CheckOutcome:
    if window.window_s >= cfg.min_valid_window_s:
        return _PASSED
    return _outcome(
        [
            f"The measured window lasted {window.window_s:.2f} s, shorter than "
            f"measurement.min_valid_window_s={cfg.min_valid_window_s:g} s: NVML's energy counter "
            "updates about every 100 ms, so windows this short read low "
            "(raise measurement.min_window_s to measure longer)."
        ]
    )


def _sampler_coverage(window: WindowResult, cfg: MeasurementConfig) -> PerDevice:
    """Judged only where the energy is integrated from the samples (``nvml_power``); with an
    energy counter (or a replayed trace) a shortfall leaves gaps in the other readings only, a
    condition."""
    expected = window.window_s * cfg.sample_hz + 1
    out: PerDevice = {}
    for d in window.devices:
        got = sum(1 for s in window.samples if s.device == d.uuid and s.power_w is not None)
        if got >= cfg.min_sample_coverage * expected:
            out[d.uuid] = _PASSED
            continue
        shortfall = (
            f"The power sampler has readings for {d.uuid} in {got} of the "
            f"{expected:.0f} expected samples ({got / expected:.0%}, below "
            f"measurement.min_sample_coverage={cfg.min_sample_coverage:.0%} at "
            f"measurement.sample_hz={cfg.sample_hz:g})"
        )
        if is_sampled(d.method):
            out[d.uuid] = _outcome([f"{shortfall}: its energy is integrated from those samples."])
        else:
            out[d.uuid] = (
                Check.condition,
                [
                    f"{shortfall}: peak power, temperatures and throttling have gaps; the energy "
                    f"comes from {d.method or 'elsewhere'} and is unaffected."
                ],
            )
    return out


def _throttling(window: WindowResult) -> PerDevice:
    """A hardware or thermal slowdown fails; a power cap alone is a condition (see
    ``llem.measure.throttle`` for why)."""
    slowed: dict[str, list[str]] = {}
    capped: dict[str, list[tuple[str, ...]]] = {}
    capped_w: dict[str, list[float]] = {}  # power in the samples with a power-cap reason
    for s in window.samples:
        names = s.throttle_reasons
        if names is None:
            continue
        slowed.setdefault(s.device, []).extend(n for n in names if n in SLOWDOWN_REASONS)
        capped.setdefault(s.device, []).append(names)
        if s.power_w is not None and any(n in POWER_CAP_REASONS for n in names):
            capped_w.setdefault(s.device, []).append(s.power_w)
    out: PerDevice = {}
    for uuid, readings in capped.items():
        slow = slowed.get(uuid)
        share, per_reason = power_cap_shares(readings)
        watts = capped_w.get(uuid)
        if slow:
            out[uuid] = _outcome(
                [
                    f"{uuid} was slowed down during the window ({', '.join(sort_reasons(slow))}):"
                    " a hardware or thermal slowdown, so its clocks, speed and energy are those of "
                    "the event, not of the configuration."
                ]
            )
        elif share:
            drawn = f", drawing {sum(watts) / len(watts):.0f} W on average in them" if watts else ""
            out[uuid] = (
                Check.condition,
                [
                    f"{uuid}'s clocks were held down for power (NVML's {', '.join(per_reason)}) "
                    f"in {share:.0%} of the window's samples{drawn}: a condition of the "
                    "measurement, recorded in thermal.power_capped_fraction; the energy figure is "
                    "valid for it."
                ],
            )
        else:
            out[uuid] = _PASSED
    return out


def _other_processes(window: WindowResult, workload_said: str | None) -> CheckOutcome:
    if window.other_processes is None:
        return _NOT_CHECKED
    if not window.other_processes:
        return _PASSED
    listed = ", ".join(
        f"pid {p.pid} on {p.device}"
        + ("" if p.used_memory_mb is None else f" ({p.used_memory_mb:.0f} MB)")
        for p in window.other_processes
    )
    whose = "" if workload_said is None else f" ({workload_said})"
    return _outcome(
        [
            f"Other processes used a measured GPU during the window ({listed}); NVML counts "
            f"their energy as this run's{whose}."
        ]
    )


def _temperature_steady(window: WindowResult, cfg: MeasurementConfig) -> PerDevice:
    """A rise above ``max_temp_rise_c`` is a condition, never a failure: the cool-down starts every
    window near idle temperature on purpose, so the GPU warms inside it (see the README)."""
    return {
        uuid: (
            (
                Check.condition,
                [
                    f"The temperature of {uuid} rose {rise:.1f} C across the window (more than "
                    f"measurement.max_temp_rise_c={cfg.max_temp_rise_c:g} C; recorded in "
                    "thermal.temp_rise_c): the window started from the cool-down's temperature, "
                    "so its energy includes the warming, as every repeat's does."
                ],
            )
            if rise > cfg.max_temp_rise_c
            else _PASSED
        )
        for uuid, rise in temperature_rises_c(window).items()
    }


def idle_reference_limit(device: DeviceInfo) -> tuple[float | None, str]:
    """The power limit idle power is judged against, and its name: the GPU's default limit.

    An idle GPU draws far below any limit, so its idle power does not depend on the limit set:
    judged against a lowered limit (``gpu.power_limit_w``), a plausible idle would look busy and
    the low end of a power-limit sweep would drop out. The enforced limit stands in only where
    NVML cannot report the default (then it cannot change the limit either)."""
    if device.default_power_limit_w:
        return device.default_power_limit_w, "default power limit"
    return device.power_limit_w, "power limit (NVML reports no default limit)"


def _idle_power(
    idle: IdleBaseline, devices: Sequence[DeviceInfo], cfg: MeasurementConfig
) -> PerDevice:
    if idle.power_w is None or not idle.per_device_w:
        return {}
    limits = {d.uuid: idle_reference_limit(d) for d in devices}
    out: PerDevice = {}
    for uuid, watts in idle.per_device_w.items():
        limit, limit_name = limits.get(uuid, (None, ""))
        problems = []
        if watts < cfg.idle_power_min_w:
            problems.append(
                f"The idle power of {uuid}, {watts:.1f} W, is implausibly low (below "
                f"measurement.idle_power_min_w={cfg.idle_power_min_w:g} W); idle-adjusted "
                "figures are unreliable."
            )
        elif limit and watts > cfg.idle_power_max_fraction * limit:
            problems.append(
                f"The idle power of {uuid}, {watts:.1f} W, is implausibly high (above "
                f"measurement.idle_power_max_fraction={cfg.idle_power_max_fraction:g} of its "
                f"{limit:.0f} W {limit_name}): the GPU was busy while idle was measured."
            )
        out[uuid] = _outcome(problems)
    return out


def _energy_nonzero(window: WindowResult) -> PerDevice:
    return {
        d.uuid: _outcome(
            [
                f"The energy of {d.uuid} read {d.energy_j:.3f} J over {window.window_s:.2f} s "
                "(the counter did not advance), so the energy figures are left null."
            ]
            if d.energy_j <= 0
            else []
        )
        for d in window.devices
        if d.energy_j is not None
    }


def _energy_read(window: WindowResult) -> PerDevice:
    """Each GPU whose own energy reading failed in the window fails, naming it and the error."""
    return {
        d.uuid: _outcome(
            [
                f"The energy of {d.uuid} could not be measured: {why}; so the window's total "
                "energy is unknown (the other GPUs' energy is in energy.per_device_j)."
            ]
            if (why := window.device_failures.get(d.uuid)) is not None
            else []
        )
        for d in window.devices
    }


def _whole_gpu(devices: Sequence[DeviceInfo]) -> CheckOutcome:
    if not devices:
        return _NOT_CHECKED
    return _outcome(
        [
            f"torch device cuda:{d.torch_index} is MIG instance {d.mig_uuid}: NVML reports power "
            f"and energy only for the whole GPU {d.uuid}, shared with its other instances, so "
            "this run's energy cannot be told apart from theirs."
            for d in devices
            if d.mig_uuid
        ]
    )


def assess(
    window: WindowResult,
    *,
    cfg: MeasurementConfig,
    device_type: str,
    unavailable_reason: str | None,
    idle: IdleBaseline,
    devices: Sequence[DeviceInfo],
    workload_said: str | None = None,
) -> tuple[Validity, dict[str, str]]:
    """The verdict on ``window``'s energy, and the reason when there is none (``unavailable_reason``
    set means no energy was measured); the run is on ``device_type``; ``workload_said``: whose
    processes outside llem's tree were the run's own (a running server's)."""
    if unavailable_reason is not None:
        why = (
            f"the run is on device={device_type}: no GPU energy to judge"
            if not on_gpu(device_type)
            else f"no energy was measured: {unavailable_reason}"
        )
        checks = dict.fromkeys(CHECKS, Check.not_checked.value)
        section = Validity(checks=checks, per_device={})
        return with_figures(section, "validity", {"energy_valid": Figure.null(why)})
    per_device: dict[str, PerDevice] = {
        "sampler_coverage": _sampler_coverage(window, cfg),
        "throttling": _throttling(window),
        "temperature_steady": _temperature_steady(window, cfg),
        "idle_power_plausible": _idle_power(idle, devices, cfg),
        "energy_nonzero": _energy_nonzero(window),
        "energy_read": _energy_read(window),
    }
    outcomes = {
        "window_length": _window_length(window, cfg),
        "other_processes": _other_processes(window, workload_said),
        "whole_gpu": _whole_gpu(devices),
        **{name: combined(found) for name, found in per_device.items()},
    }
    outcomes = {name: outcomes[name] for name in CHECKS}
    problems = [p for status, ps in outcomes.values() if status is Check.failed for p in ps]
    conditions = [p for status, ps in outcomes.values() if status is Check.condition for p in ps]
    checks = {name: status.value for name, (status, _) in outcomes.items()}
    verdict = Figure(not any(c == Check.failed.value for c in checks.values()))
    section = Validity(
        problems=problems,
        checks=checks,
        conditions=conditions,
        per_device=by_device([d.uuid for d in window.devices], per_device),
    )
    return with_figures(section, "validity", {"energy_valid": verdict})

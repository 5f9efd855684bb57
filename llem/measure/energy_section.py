"""The ``energy`` section of a measured window: joules per device and in total, the idle baseline,
the per-token and per-request figures, each with its worst-case bound or the reason it is null.

Each energy figure ``X`` has a bound in the same unit (see ``llem.measure.uncertainty``): the true
value lies within ``X +/- bound`` as far as the source's own limits go. A device whose energy reads
0 J (or less) is reported with a warning and null energy, never as 0 J.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from llem.measure import uncertainty
from llem.measure.idle import IdleBaseline, IdleSource
from llem.measure.meter import WindowResult, is_sampled
from llem.result import Energy, Figure
from llem.result.figure import with_figures

DEFINITION = (
    "j_per_output_token = total_j / output tokens; total_j is the whole measured window "
    "(idle power included; see idle_adjusted_j)"
)


@dataclass(frozen=True)
class Counts:
    """What the window produced: the denominators of the per-token and per-request figures."""

    output_tokens: int
    input_tokens: int
    requests: int


@dataclass(frozen=True)
class _Total:
    per_device: dict[str, Figure]
    total: Figure  # null with the reason when any device has no energy
    components: dict[str, float] | None = None  # of total's bound, summed over devices


def source_name(window: WindowResult) -> str:
    """How the measured devices' energy was measured, the least exact method winning."""
    methods = {d.method for d in window.devices if d.method is not None}
    if "replay" in methods:
        return "replay"
    sampled = sorted(m for m in methods if is_sampled(m))
    if sampled:
        return sampled[0]
    return min(methods) if methods else "unavailable"


def _device_totals(window: WindowResult, warnings: list[str], source: str) -> _Total:
    per_device: dict[str, Figure] = {}
    for uuid, why in window.device_failures.items():
        warnings.append(
            f"{uuid}: energy unavailable: {why}; the other GPUs were measured, the total is null"
        )
    for d in window.devices:
        j = d.energy_j
        if j is not None and j <= 0:
            warnings.append(
                f"{d.uuid}: energy read {j:.3f} J over the {window.window_s:.3f} s "
                "window (the counter did not advance; window shorter than its "
                "update period?); energy figures left null"
            )
            per_device[d.uuid] = Figure.null(f"energy read {j:.3f} J (not credible)")
        elif j is None:
            per_device[d.uuid] = Figure.null(d.null_reason or "not measured")
        else:
            per_device[d.uuid] = Figure(j, d.uncertainty_j)
    missing = [f"{u}: {f.null_reason}" for u, f in per_device.items() if f.value is None]
    if missing:
        return _Total(per_device, Figure.null("no energy for " + "; ".join(missing)))
    bounds = [f.bound for f in per_device.values()]
    known = [b for b in bounds if b is not None]
    bounded = len(known) == len(bounds)
    return _Total(
        per_device,
        Figure.of(
            sum(f.value for f in per_device.values()),
            None,
            sum(known) if bounded else None,
            _no_bound(source),
        ),
        uncertainty.add([d.uncertainty_components for d in window.devices]) if bounded else None,
    )


def _no_bound(source: str) -> str:
    return f"the {source} source gives no bound for some device"


def _idle_figures(
    total: Figure,
    idle: IdleBaseline,
    window_s: float,
    warnings: list[str],
    unavailable_reason: str | None,
    no_bound: str,
) -> dict[str, Figure]:
    why_no_idle = idle.null_reason or unavailable_reason
    idle_power = Figure.of(idle.power_w, why_no_idle, idle.power_uncertainty_w, no_bound)
    if total.value is None or idle.power_w is None:
        why = total.null_reason or idle.null_reason
        return {"idle_power_w": idle_power, "idle_adjusted_j": Figure.null(why or "not measured")}
    adjusted = total.value - idle.power_w * window_s
    if adjusted < 0:
        warnings.append(
            f"idle-adjusted energy is negative ({adjusted:.3f} J): the window drew "
            "less than the idle baseline"
        )
    adjusted_bound = None
    if total.bound is not None and idle.power_uncertainty_w is not None:
        adjusted_bound = total.bound + idle.power_uncertainty_w * window_s
    return {
        "idle_power_w": idle_power,
        "idle_adjusted_j": Figure.of(adjusted, None, adjusted_bound, no_bound),
    }


def _no_bound_of(total: Figure) -> str | None:
    """Why a figure derived from ``total`` has no bound: ``total`` has none."""
    return total.bound_null_reason


def _ratio(total: Figure, denominator: float, what: str) -> Figure:
    """``total / denominator`` with its bound; null when either is missing."""
    if total.value is None:
        return Figure.null(total.null_reason or "not measured")
    if denominator <= 0:
        return Figure.null(f"no {what}")
    bound = uncertainty.ratio_bound(total.bound, denominator)
    return Figure.of(total.value / denominator, None, bound, _no_bound_of(total))


def _wh_per_1k(j_per_request: Figure) -> Figure:
    """J per request -> Wh per 1,000 requests (x 1000 / 3600)."""
    if j_per_request.value is None:
        return j_per_request
    scale = 1000.0 / 3600.0
    bound = None if j_per_request.bound is None else j_per_request.bound * scale
    return Figure.of(j_per_request.value * scale, None, bound, j_per_request.bound_null_reason)


def _tokens_per_j(total: Figure, output_tokens: int) -> Figure:
    if total.value is None:
        return Figure.null(total.null_reason or "not measured")
    if output_tokens <= 0:
        return Figure.null("no output tokens")
    bound = uncertainty.inverse_ratio_bound(output_tokens, total.value, total.bound)
    why = "the energy bound is as large as the energy"
    return Figure.of(output_tokens / total.value, None, bound, why)


def _ratios(total: Figure, counts: Counts, window_s: float) -> dict[str, Figure]:
    per_request = _ratio(total, counts.requests, "requests")
    all_tokens = counts.output_tokens + counts.input_tokens
    return {
        "j_per_output_token": _ratio(total, counts.output_tokens, "output tokens"),
        "j_per_request": per_request,
        "avg_power_w": _ratio(total, window_s, "window time"),
        "j_per_total_token": _ratio(total, all_tokens, "tokens"),
        "output_tokens_per_j": _tokens_per_j(total, counts.output_tokens),
        "wh_per_1k_requests": _wh_per_1k(per_request),
    }


def _peak_power(window: WindowResult) -> Figure:
    """The highest sum over devices of one tick's power readings (ticks with every device read:
    never a partial sum)."""
    every = {d.uuid for d in window.devices}
    sums = [
        sum(s.power_w or 0.0 for s in group)
        for _, group in window.ticks
        if group
        and {s.device for s in group} >= every
        and all(s.power_w is not None for s in group)
    ]
    return Figure(max(sums)) if sums else Figure.null("no power samples")


def _device_power(
    window: WindowResult, per_device_j: Mapping[str, Figure], why_not: str | None
) -> dict[str, dict[str, Figure]]:
    """Each device's mean power (its energy over the window's length, with the bound) and its
    highest power sample; null with the reason (``why_not``: no energy was measured at all)."""
    avg: dict[str, Figure] = {}
    peak: dict[str, Figure] = {}
    for d in window.devices:
        watts = [s.power_w for s in window.samples if s.device == d.uuid and s.power_w is not None]
        peak[d.uuid] = Figure.of(max(watts) if watts else None, why_not or "no power samples")
        j = per_device_j.get(d.uuid, Figure.null(why_not or "not measured"))
        avg[d.uuid] = _ratio(j, window.window_s, "window time")
    return {"per_device_avg_power_w": avg, "per_device_peak_power_w": peak}


def _cpu(window: WindowResult, disabled_reason: str | None) -> tuple[dict[str, object], Figure]:
    """(the CPU fields, cpu_package_j): RAPL's package energy, or the reason there is none."""
    if disabled_reason is None and window.cpu_package_j is not None:
        return {"cpu_source": "rapl", "cpu_unavailable_reason": None}, Figure(window.cpu_package_j)
    why = disabled_reason or window.cpu_null_reason or "not measured"
    fields: dict[str, object] = {"cpu_source": "unavailable", "cpu_unavailable_reason": why}
    return fields, Figure.null(why)


#: filled after the window by the run (llem.runner.attribution); null until then
ATTRIBUTED = (
    "prefill_j",
    "decode_j",
    "between_steps_j",
    "j_per_prefill_token",
    "j_per_decode_token",
    "unattributed_j",
    "fit",
)
NOT_ATTRIBUTED = "not attributed: the run splits the energy by engine step after the window"


def energy_section(
    window: WindowResult,
    *,
    unavailable_reason: str | None,
    idle: IdleBaseline,
    counts: Counts,
    warnings: list[str],
    cpu_disabled_reason: str | None = None,
) -> tuple[Energy, dict[str, str]]:
    """The window's ``Energy`` and the null reasons of its figures (``energy.X``). ``warnings``
    gets this section's own warnings appended and becomes its ``warnings``."""
    fields: dict[str, object] = {"unavailable_reason": unavailable_reason}
    if unavailable_reason is None:
        source = source_name(window)
        totals = _device_totals(window, warnings, source)
        specs = [d.sensor for d in window.devices if d.method == source]
        fields["uncertainty_method"] = uncertainty.method_text(source, specs[0] if specs else None)
        fields["uncertainty_components"] = totals.components
        peak = _peak_power(window)
    else:
        source = "unavailable"
        totals = _Total({}, Figure.null(unavailable_reason))
        peak = Figure.null(unavailable_reason)
    cpu_fields, cpu_j = _cpu(window, cpu_disabled_reason)
    procs = window.other_processes
    figures: dict[str, Figure | Mapping[str, Figure]] = {
        "window_s": Figure(round(window.window_s, 6)),
        "total_j": totals.total,
        "per_device_j": totals.per_device,
        **_idle_figures(
            totals.total, idle, window.window_s, warnings, unavailable_reason, _no_bound(source)
        ),
        **_ratios(totals.total, counts, window.window_s),
        "peak_power_w": peak,
        **_device_power(window, totals.per_device, unavailable_reason),
        "cpu_package_j": cpu_j,
        "idle_measured_at": Figure.of(idle.measured_at, idle.null_reason),
        "other_processes": Figure.of(
            None if procs is None else list(procs),
            unavailable_reason or f"the {source} source cannot list GPU processes",
        ),
        **{name: Figure.null(unavailable_reason or NOT_ATTRIBUTED) for name in ATTRIBUTED},
    }
    energy = Energy(
        source=source,
        warnings=warnings,
        idle_source=idle.source.value,
        idle_age_s=idle.age_s,
        idle_temperature_c=dict(idle.temperature_c) if idle.power_w is not None else None,
        definition=DEFINITION,
        **fields,  # type: ignore[arg-type]
        **cpu_fields,  # type: ignore[arg-type]
    )
    energy, reasons = with_figures(energy, "energy", figures)
    return energy, {**reasons, **_idle_reasons(energy, idle, unavailable_reason)}


def _idle_reasons(
    energy: Energy, idle: IdleBaseline, unavailable_reason: str | None
) -> dict[str, str]:
    """Why the idle baseline's age and temperatures are null."""
    why = idle.null_reason or unavailable_reason or "no idle baseline was measured"
    reasons: dict[str, str] = {}
    if energy.idle_age_s is None:
        measured_here = idle.source is IdleSource.measured_this_run
        reasons["energy.idle_age_s"] = (
            "the idle baseline was measured by this run, right before its window"
            if measured_here
            else why
        )
    if energy.idle_temperature_c is None:
        reasons["energy.idle_temperature_c"] = why
    return reasons

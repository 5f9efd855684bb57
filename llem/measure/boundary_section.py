"""The ``boundary`` section of a measured window: what its energy covers, each component's figure.

With ``measurement.boundary=gpu`` the components are the measured GPUs alone (``energy.total_j``);
the CPU packages and DRAM are listed as outside and their figures are null with that reason. With
``node`` the host's RAPL package and DRAM domains read over the same window join them; each
component is idle-adjusted with its own idle power from the same idle window (see
``llem.measure.idle``). A component that could not be read is null with the reason, and so is every
total it belongs to: a total never leaves a part out silently. A CPU whose RAPL has no DRAM domain
at all (AMD CPUs, most Intel clients) is another matter: there is nothing to read, so the node's
DRAM is listed as outside the boundary (``DRAM_OUTSIDE``) and the node's total is the GPUs and the
packages, its ``dram_j`` null with that reason. Likewise a run that uses no GPU (``device=cpu``)
on a host where no vendor library starts (no GPU is visible to NVML or amdsmi, ``gpus_absent``):
the GPUs are listed as outside with that reason, and the node's total is its packages and DRAM.
A GPU that is visible but not read (a CPU run on a GPU host) keeps the total null.

Bounds: the GPUs' figure keeps ``energy.total_j``'s bound, and a total of bounded parts the sum of
theirs. RAPL states no accuracy (``llem.measure.rapl_bound``), so the packages, DRAM and a total
holding them have a null bound whose reason says what is known: the GPUs' bound and
``rapl_reading_limits_j``, the part of the RAPL figures' error that can be bounded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from llem.config.schema import MeasurementConfig
from llem.devices.cpu_affinity import package_coverage
from llem.devices.cpu_energy import CpuEnergy
from llem.measure.energy_section import Counts
from llem.measure.idle import IdleBaseline
from llem.measure.meter import WindowResult
from llem.measure.rapl_bound import NO_ACCURACY, limits_text, reading_limits_j
from llem.measure.sources import DISABLED, energy_mode
from llem.measure.uncertainty import ratio_bound
from llem.result import Energy, Figure
from llem.result.boundary import Boundary
from llem.result.figure import read_figure, with_figures

ALWAYS_OUTSIDE = (
    "power supply losses (AC to DC conversion) of this host",
    "fans, pumps and the rest of the chassis and cooling",
    "network interfaces, switches and storage",
    "other hosts (a client, a load balancer, other nodes of a job)",
    "GPUs of this host that the run does not use",
)
CPU_OUTSIDE = (
    "this host's CPU packages (measurement.boundary=gpu: read into energy.cpu_package_j, "
    "not added)",
    "this host's DRAM (measurement.boundary=gpu)",
)
OUTSIDE_GPU = "outside the boundary: measurement.boundary=gpu counts the GPUs only"
DRAM_OUTSIDE = (
    "this host's DRAM: its CPU's RAPL has no DRAM domain (AMD CPUs, most Intel clients), so "
    "there is nothing to read"
)
NO_DRAM_DOMAIN = "outside the boundary: this CPU's RAPL has no DRAM domain"
COMPONENTS = ("gpu", "cpu_package", "dram")


def gpus_outside(why: str) -> str:
    """``boundary.outside``'s sentence for a host with no GPU to see (``why``: the libraries')."""
    return (
        f"this host's GPUs: the run uses none and {why}; the power of a GPU present without a "
        "working driver, if any, is not in the total"
    )


def _plain(f: Figure) -> Figure:
    """``f`` without its bound (for the figures that carry none: the GPUs' is in ``energy``)."""
    return Figure.of(f.value, f.null_reason)


def _cpu_figures(
    cpu: CpuEnergy | None, node: bool, disabled_reason: str | None
) -> dict[str, Figure]:
    out: dict[str, Figure] = {}
    for name, kind in (("cpu_package", "package"), ("dram", "dram")):
        if not node:
            out[name] = Figure.null(OUTSIDE_GPU)
        elif disabled_reason is not None:
            out[name] = Figure.null(disabled_reason)
        elif cpu is None:
            out[name] = Figure.null("RAPL was not read in this window")
        else:
            total = cpu.total(kind)
            out[name] = Figure.of(total.value_j, total.reason, bound_null_reason=NO_ACCURACY)
    if node and no_dram_domain(cpu, disabled_reason):
        out["dram"] = Figure.null(NO_DRAM_DOMAIN)
    return out


def no_dram_domain(cpu: CpuEnergy | None, disabled_reason: str | None) -> bool:
    """RAPL was read and lists packages but no DRAM domain: DRAM is outside, not unread."""
    if cpu is None or disabled_reason is not None or cpu.unavailable_reason is not None:
        return False
    kinds = {d.domain.split("-", 1)[0] for d in cpu.domains}
    return "package" in kinds and "dram" not in kinds


def _sum(parts: Mapping[str, Figure], limits: dict[str, float] | None = None) -> Figure:
    """The parts' sum, or null naming each part that is null and why; bounded by the sum of the
    parts' bounds, or with a null bound saying what is known (``limits``: RAPL's reading limits)."""
    missing = [f"{name}: {f.null_reason}" for name, f in parts.items() if f.value is None]
    if missing:
        return Figure.null("a component is null (" + "; ".join(missing) + ")")
    value = sum(float(f.value) for f in parts.values())
    if all(f.bound is not None for f in parts.values()):
        return Figure(value, sum(float(f.bound or 0.0) for f in parts.values()))
    rapl = [name for name, f in parts.items() if f.bound_null_reason == NO_ACCURACY]
    known = [
        f"{name} +/- {f.bound:.3g} J" if f.bound is not None else f"{name}: {f.bound_null_reason}"
        for name, f in parts.items()
        if name not in rapl
    ]
    if rapl:
        known.append(limits_text(limits))
        why = f"{' and '.join(rapl)} hold RAPL energy: {NO_ACCURACY}; known: " + ", ".join(known)
    else:
        why = "a component has no bound (" + "; ".join(known) + ")"
    return Figure(value, bound_null_reason=why)


def _idle_adjusted(
    energy_j: Figure, idle: IdleBaseline, kind: str, cpu: CpuEnergy | None
) -> Figure:
    if energy_j.value is None:
        return energy_j
    idle_w, why = idle.cpu_idle_w(kind)
    if idle_w is None or cpu is None:
        return Figure.null(f"no idle {kind} power: {why or 'RAPL was not read'}")
    return Figure(float(energy_j.value) - idle_w * cpu.duration_s)


def _per_token(energy_j: Figure, output_tokens: int) -> Figure:
    if energy_j.value is None:
        return energy_j
    if output_tokens <= 0:
        return Figure.null("no output tokens")
    bnd = ratio_bound(energy_j.bound, output_tokens)
    return Figure(float(energy_j.value) / output_tokens, bnd, None, energy_j.bound_null_reason)


def _reading_limits(
    window: WindowResult, node: bool, disabled_reason: str | None
) -> tuple[dict[str, float] | None, Figure]:
    """RAPL's reading limits over the window (``llem.measure.rapl_bound``) and their sum."""
    if not node:
        return None, Figure.null(OUTSIDE_GPU)
    if disabled_reason is not None:
        return None, Figure.null(disabled_reason)
    if window.cpu is None:
        return None, Figure.null("RAPL was not read in this window")
    limits, why = reading_limits_j(window.cpu, ("package", "dram"), window.window_s)
    return limits, Figure.of(None if limits is None else sum(limits.values()), why)


def _domains(cpu: CpuEnergy | None, kind: str) -> list[str]:
    if cpu is None:
        return []
    return [d.domain for d in cpu.domains if d.domain.startswith(kind + "-")]


def _coverage_note(packages: Sequence[str]) -> str | None:
    if not packages:
        return None
    numbers = [int(p.split("-", 1)[1]) for p in packages]
    return package_coverage(numbers).note


def _outside(node: bool, no_dram: bool, gpus_absent: str | None) -> list[str]:
    """``boundary.outside``: always, the CPU's parts for the gpu boundary, and what a node lacks."""
    return (
        list(ALWAYS_OUTSIDE)
        + ([] if node else list(CPU_OUTSIDE))
        + ([DRAM_OUTSIDE] if no_dram else [])
        + ([gpus_outside(gpus_absent)] if gpus_absent is not None else [])
    )


def boundary_section(
    window: WindowResult,
    cfg: MeasurementConfig,
    energy: Energy,
    energy_reasons: Mapping[str, str],
    idle: IdleBaseline,
    counts: Counts,
    gpus_absent: str | None = None,
) -> tuple[Boundary, dict[str, str]]:
    """The window's ``Boundary`` (``cfg.boundary``) and the null reasons of its figures
    (``boundary.X``); ``energy`` is the window's energy section, with its null reasons;
    ``gpus_absent``: why a run that uses no GPU has none to read (its node leaves them out)."""
    boundary = str(getattr(cfg.boundary, "value", cfg.boundary))
    node = boundary == "node"
    n = counts.output_tokens
    cpu_disabled_reason = DISABLED if energy_mode(cfg) == "none" else None
    gpu = {
        "gpu": read_figure(energy, "energy", "total_j", energy_reasons),
        **_cpu_figures(window.cpu, node, cpu_disabled_reason),
    }
    limits, limits_j = _reading_limits(window, node, cpu_disabled_reason)
    gpu_adjusted = _plain(read_figure(energy, "energy", "idle_adjusted_j", energy_reasons))
    adjusted = {
        "gpu": gpu_adjusted,
        "cpu_package": _idle_adjusted(gpu["cpu_package"], idle, "package", window.cpu),
        "dram": _idle_adjusted(gpu["dram"], idle, "dram", window.cpu),
    }
    no_dram = node and no_dram_domain(window.cpu, cpu_disabled_reason)
    no_gpus = node and gpus_absent is not None and cpu_disabled_reason is None
    inside = gpu if node else {"gpu": gpu["gpu"]}
    if no_dram:
        inside = {k: v for k, v in inside.items() if k != "dram"}
        adjusted["dram"] = Figure.null(NO_DRAM_DOMAIN)
    if no_gpus:
        inside = {k: v for k, v in inside.items() if k != "gpu"}
        gpu["gpu"] = adjusted["gpu"] = Figure.null(f"outside the boundary: {gpus_absent}")
    total = _sum(inside, limits)
    adjusted_total = _plain(_sum({k: adjusted[k] for k in inside}))
    figures: dict[str, Figure | Mapping[str, Figure]] = {
        **{f"{c}_j": gpu[c] for c in COMPONENTS},
        "total_j": total,
        **{f"{c}_idle_adjusted_j": adjusted[c] for c in COMPONENTS},
        "idle_adjusted_j": adjusted_total,
        **{f"{c}_j_per_output_token": _plain(_per_token(gpu[c], n)) for c in COMPONENTS},
        "j_per_output_token": _per_token(total, n),
        "rapl_reading_limits_j": limits_j,
    }
    packages = _domains(window.cpu, "package") if node else []
    dram = _domains(window.cpu, "dram") if node else []
    section = Boundary(
        boundary=boundary,
        gpus=[d.uuid for d in window.devices],
        cpu_packages=packages,
        cpu_packages_note=_coverage_note(packages),
        dram=dram,
        includes=[f"this host's RAPL domains {', '.join(packages + dram)}"] if no_gpus else [],
        outside=_outside(node, no_dram, gpus_absent if no_gpus else None),
    )
    return with_figures(section, "boundary", figures)

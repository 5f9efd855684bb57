"""Before a run: which parts of ``measurement.boundary=node`` this machine can read.

A node's energy is the run's GPUs' (through their vendor library, or a replayed trace), its CPU
packages' and its DRAM's (RAPL, through powercap). Each part is checked the way the run reads it,
before anything loads: the GPU library is opened and asked which GPUs are visible, and every RAPL
counter is read once through the reader the run uses (``energy_uj`` is root-only since Linux 5.10:
a read is how that is found out).

* No part can be read: one pre-flight problem (exit 3) naming each part and why, and what to set
  instead; the run would otherwise load, generate and end with no energy at all.
* Only part can: a warning naming the parts that will be null, and that the node's ``total_j``
  will be null with them (``llem.measure.boundary_section``); the rest keep their own figures.
* A CPU whose RAPL has no DRAM domain, its packages read: DRAM is outside the boundary, as the
  run's ``boundary.outside`` lists it, so it counts neither as read nor as unread. So are the
  GPUs of a run that uses none (``device=cpu``) on a host where no vendor library starts, where
  RAPL is read: the node's total is then the packages and DRAM, and nothing is warned.

``measurement.boundary=gpu`` (the default) is not checked here: a run on a machine without a GPU
still measures its time, and says why its energy is unavailable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from llem.config.schema import MeasurementConfig
from llem.devices.cpu_energy import RaplReader
from llem.devices.gpu import GpuOpener, GpuUnavailable, Inventory, error_text, on_gpu
from llem.devices.powercap import RAPL_PERMISSION_HINT
from llem.measure.boundary_section import no_dram_domain
from llem.measure.sources import DISABLED, energy_mode, off_gpu, short_nvml_error

GPUS, PACKAGES, DRAM = "GPUs", "CPU packages", "DRAM"
INSTEAD = (
    "leave measurement.boundary at gpu (the default: a run whose energy cannot be read still "
    "measures its time, and says why)"
)


@dataclass(frozen=True)
class NodeCheck:
    """The pre-flight problems (one sentence each) and warnings of the boundary."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def gpu_reason(
    cfg: MeasurementConfig, device_type: str, env: Mapping[str, str], opener: GpuOpener
) -> str | None:
    """Why the run's GPUs cannot be read (None: they can)."""
    if energy_mode(cfg) == "replay":
        return None
    if not on_gpu(device_type):  # the run's own reason: no GPU library, or not on its GPU
        return off_gpu(device_type, opener).unavailable_reason
    try:
        lib = opener()
    except GpuUnavailable as exc:
        return f"NVML is not available ({short_nvml_error(exc)})"
    try:
        visible, shown = lib.visible(Inventory(lib), env)
    except Exception as exc:
        return f"{lib.api} device queries fail ({error_text(exc)})"
    finally:
        lib.shutdown()
    return None if visible else f"no GPU is visible ({shown})"


def rapl_reasons(reader: RaplReader) -> dict[str, str | None]:
    """Why the CPU packages and DRAM cannot be read (None: they can), from one read of every
    counter; DRAM is left out where the CPU's RAPL has no DRAM domain (outside the boundary)."""
    snapshot = reader.snapshot()
    cpu = reader.energy(snapshot, snapshot)
    reasons = {PACKAGES: cpu.total("package").reason, DRAM: cpu.total("dram").reason}
    if no_dram_domain(cpu, None):
        del reasons[DRAM]
    return reasons


def check_node(
    cfg: MeasurementConfig,
    device_type: str,
    env: Mapping[str, str],
    opener: GpuOpener,
    rapl: Callable[[], RaplReader],
    refused: str | None = None,
) -> NodeCheck:
    """The boundary's problems and warnings; none unless ``cfg.boundary`` is ``node``.
    ``rapl`` opens the reader the run will use (called only here, for a node); ``refused`` says
    why this host's meters are not the run's (a running server elsewhere, or on GPUs not named:
    the run then reads none of them)."""
    if str(getattr(cfg.boundary, "value", cfg.boundary)) != "node":
        return NodeCheck()
    reasons: dict[str, str | None]
    if energy_mode(cfg) == "none" or refused is not None:
        reasons = dict.fromkeys((GPUS, PACKAGES, DRAM), refused or DISABLED)
    else:
        reasons = {GPUS: gpu_reason(cfg, device_type, env, opener), **rapl_reasons(rapl())}
    unread = {part: why for part, why in reasons.items() if why is not None}
    if _gpus_absent(cfg, device_type, opener, refused) and len(unread) < len(reasons):
        del reasons[GPUS], unread[GPUS]  # outside, as the run's boundary.outside says
    if not unread:
        return NodeCheck()
    said = _grouped(unread)
    if len(unread) < len(reasons):
        read = _joined([p for p in reasons if p not in unread])
        return NodeCheck(
            warnings=[
                f"measurement.boundary=node: part of the node cannot be read ({said}), so the "
                f"node's total_j will be null; {read} keep their own figures{_readable(unread)}"
            ]
        )
    return NodeCheck(
        problems=[
            f"measurement.boundary=node: no part of the node can be read here ({said}), so the "
            f"run would end with no energy at all; {_instead(unread)}"
        ]
    )


def _gpus_absent(
    cfg: MeasurementConfig, device_type: str, opener: GpuOpener, refused: str | None
) -> bool:
    """The run uses no GPU and no vendor library starts here (``OpenedSource.gpus_absent``)."""
    if on_gpu(device_type) or refused is not None or energy_mode(cfg) != "auto":
        return False
    return off_gpu(device_type, opener).gpus_absent is not None


def _grouped(unread: Mapping[str, str]) -> str:
    """``GPUs: why; CPU packages and DRAM: why`` (parts with the same reason said once; RAPL's
    permission hint left for ``_instead``)."""
    by_reason: dict[str, list[str]] = {}
    for part, why in unread.items():
        by_reason.setdefault(why.replace(": " + RAPL_PERMISSION_HINT, ""), []).append(part)
    return "; ".join(f"{_joined(parts)}: {why}" for why, parts in by_reason.items())


def _joined(parts: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``."""
    return " and ".join(filter(None, [", ".join(parts[:-1]), parts[-1]]))


def _instead(unread: Mapping[str, str]) -> str:
    """What to set instead: the gpu boundary, or what makes the node readable."""
    ways = [INSTEAD]
    if any(why == DISABLED for why in unread.values()):
        ways.append("set measurement.energy=auto to measure the node")
    return "; or ".join(ways) + _readable(unread, "; or make")


def _readable(unread: Mapping[str, str], head: str = "; make") -> str:
    """How to make root-only RAPL counters readable, where one of the reasons is that."""
    if not any(RAPL_PERMISSION_HINT in why for why in unread.values()):
        return ""
    return f"{head} RAPL readable ({RAPL_PERMISSION_HINT})"

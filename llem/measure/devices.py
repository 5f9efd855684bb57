"""Which NVML devices a run uses: torch device index -> NVML device, matched by UUID.

torch numbers the devices that ``CUDA_VISIBLE_DEVICES`` leaves visible (cuda:0 is the first entry
of that list); NVML numbers every GPU in the machine in PCI bus order and ignores the variable. So
cuda:0 is NVML device 2 under ``CUDA_VISIBLE_DEVICES=2,0``. The mapping:

1. When torch has CUDA, ask it for each device's UUID (``get_device_properties(i).uuid``) and find
   the NVML device with that UUID. This is exact whatever ``CUDA_VISIBLE_DEVICES`` or
   ``CUDA_DEVICE_ORDER`` say.
2. Otherwise parse ``CUDA_VISIBLE_DEVICES`` the way CUDA does: integers are indices, ``GPU-<uuid>``
   (a unique prefix is enough) and ``MIG-<uuid>`` select by UUID, parsing stops at the first invalid
   entry, and a repeated entry makes no device visible. Integer indices follow CUDA's order, which
   is NVML's (PCI) order only with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; a warning says so when the GPUs
   differ.

AMD (amdsmi numbers every GPU of the machine too): ROCm's runtime applies ``ROCR_VISIBLE_DEVICES``
first (indices into amdsmi's list, or ``GPU-<uuid>``), then ``HIP_VISIBLE_DEVICES`` (indices into
what ROCR left; HIP reads ``CUDA_VISIBLE_DEVICES`` when it is unset), as ROCm's "GPU isolation"
documentation describes; ``visible_devices`` parses whichever the library's
``visible_devices_var`` names. A UUID entry is matched against amdsmi's UUID; one amdsmi does not
list ends the list there, like an index out of range.

A MIG instance is measured through its parent GPU (NVML reports power and energy per physical GPU),
with a warning, and its energy is judged invalid (``llem.measure.validity``'s ``whole_gpu``); a GPU
used by several torch devices is measured once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.devices.gpu import Gpu, GpuFacts, GpuLibrary


class DeviceMappingError(Exception):
    """A requested torch device has no NVML device; ``str(exc)`` says why."""


@dataclass(frozen=True)
class DeviceInfo:
    """A measured GPU. Memory in MB (2**20 bytes, as torch figures); bandwidth in bytes/s.
    ``vendor_index`` is the GPU's number in its vendor library (NVML: PCI bus order, what
    ``CUDA_VISIBLE_DEVICES`` selects under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; amdsmi: its
    processor handles' order); ``vendor`` is ``nvidia`` or ``amd``."""

    torch_index: int | None
    vendor_index: int | None
    uuid: str
    name: str
    memory_total_mb: float | None = None
    memory_bandwidth_bytes_per_s: float | None = None
    mig_uuid: str | None = None  # the MIG instance torch used, when it was one
    null_reasons: Mapping[str, str] = field(default_factory=dict)
    power_limit_w: float | None = None  # the enforced power limit
    # the limit the GPU ships with (nvmlDeviceGetPowerManagementDefaultLimit), whatever is set now
    default_power_limit_w: float | None = None
    vendor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "torch_index": self.torch_index,
            "vendor": self.vendor,
            "vendor_index": self.vendor_index,
            "uuid": self.uuid,
            "name": self.name,
            "memory_total_mb": self.memory_total_mb,
            "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
            "power_limit_w": self.power_limit_w,
            "default_power_limit_w": self.default_power_limit_w,
        }


def normalise_uuid(uuid: str) -> str:
    """Lower-case UUID without its ``GPU-``/``MIG-`` prefix (torch reports it bare)."""
    u = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if u.startswith(prefix):
            return u[len(prefix) :]
    return u


def torch_device_uuids(indices: Sequence[int] | None) -> dict[int, str] | None:
    """``{torch index: UUID}`` from torch when it has CUDA, else None."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        idx = list(indices) if indices is not None else list(range(torch.cuda.device_count()))
        return {i: str(torch.cuda.get_device_properties(i).uuid) for i in idx}
    except Exception:
        return None


def describe(
    facts: GpuFacts,
    gpu: Gpu,
    torch_index: int | None,
    mig_uuid: str | None = None,
    vendor: str | None = None,
) -> DeviceInfo:
    """The measured device ``gpu`` of ``vendor`` (as torch device ``torch_index``, through
    ``mig_uuid``)."""
    return DeviceInfo(
        torch_index,
        gpu.index,
        gpu.uuid,
        facts.name,
        facts.memory_total_mb,
        facts.memory_bandwidth_bytes_per_s,
        mig_uuid,
        dict(facts.null_reasons),
        facts.power_limit_w,
        facts.default_power_limit_w,
        vendor,
    )


class Inventory:
    """The vendor library's GPUs, plus their partitions (MIG instances) when asked for."""

    def __init__(self, lib: GpuLibrary) -> None:
        self.lib = lib
        self.gpus: list[Gpu] = lib.gpus()
        self._migs: dict[str, Gpu] | None = None  # MIG uuid -> parent GPU

    def migs(self) -> dict[str, Gpu]:
        if self._migs is None:
            self._migs = {
                normalise_uuid(mig): gpu
                for gpu in self.gpus
                for mig in self.lib.partition_uuids(gpu)
            }
        return self._migs

    def by_uuid(self, uuid: str, prefix: bool = False) -> tuple[Gpu | None, str | None]:
        """(parent GPU, MIG uuid or None) for a GPU or MIG UUID; unique prefixes when ``prefix``."""
        want = normalise_uuid(uuid)
        hits = [
            g
            for g in self.gpus
            if (
                normalise_uuid(g.uuid).startswith(want)
                if prefix
                else normalise_uuid(g.uuid) == want
            )
        ]
        if len(hits) == 1:
            return hits[0], None
        if hits:
            return None, None  # ambiguous prefix
        migs = self.migs()
        keys = [k for k in migs if (k.startswith(want) if prefix else k == want)]
        if len(keys) == 1:
            return migs[keys[0]], "MIG-" + keys[0]
        return None, None


_LEGACY_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/\d+/\d+$")


def visible_from_env(inv: Inventory, cvd: str | None) -> list[tuple[Gpu, str | None]]:
    """The devices CUDA makes visible under ``CUDA_VISIBLE_DEVICES=cvd``, in CUDA's order."""
    if cvd is None:
        return [(g, None) for g in inv.gpus]
    visible: list[tuple[Gpu, str | None]] = []
    seen: list[str] = []
    for raw in cvd.split(","):
        entry = raw.strip()
        if entry in seen:
            return []  # CUDA: a repeated entry makes no device visible
        seen.append(entry)
        found: tuple[Gpu | None, str | None] = (None, None)
        if re.fullmatch(r"\d+", entry):
            i = int(entry)
            found = (inv.gpus[i], None) if i < len(inv.gpus) else (None, None)
        elif _LEGACY_MIG.match(entry):
            gpu, _ = inv.by_uuid(_LEGACY_MIG.match(entry).group(1), prefix=True)  # type: ignore[union-attr]
            found = (gpu, entry)
        elif entry.upper().startswith(("GPU-", "MIG-")):
            found = inv.by_uuid(entry, prefix=True)
        if found[0] is None:
            break  # CUDA stops at the first invalid entry
        visible.append((found[0], found[1]))
    return visible


def visible_devices(
    inv: Inventory, env: Mapping[str, str]
) -> tuple[list[tuple[Gpu, str | None]], str]:
    """(the devices the runtime makes visible, in its order; the variables that decide it, as
    messages show them: ``CUDA_VISIBLE_DEVICES is '1,3'``)."""
    if inv.lib.visible_devices_var == "HIP_VISIBLE_DEVICES":
        return _hip_visible(inv, env)
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    return visible_from_env(inv, cvd), _shown("CUDA_VISIBLE_DEVICES", cvd)


def _shown(var: str, value: str | None) -> str:
    return f"{var} is " + ("unset" if value is None else repr(value))


def _select(inv: Inventory, pool: list[Gpu], value: str | None, by_uuid: bool) -> list[Gpu]:
    """The GPUs of ``pool`` a ROCm visibility variable keeps, in its order; the list ends at
    the first entry that names no GPU of ``pool`` (or repeats one)."""
    if value is None:
        return list(pool)
    kept: list[Gpu] = []
    for raw in value.split(","):
        entry = raw.strip()
        gpu: Gpu | None = None
        if re.fullmatch(r"\d+", entry):
            gpu = pool[int(entry)] if int(entry) < len(pool) else None
        elif by_uuid and entry.upper().startswith("GPU-"):
            gpu, _ = inv.by_uuid(entry, prefix=True)
            gpu = gpu if gpu in pool else None
        if gpu is None or gpu in kept:
            break
        kept.append(gpu)
    return kept


def _hip_visible(
    inv: Inventory, env: Mapping[str, str]
) -> tuple[list[tuple[Gpu, str | None]], str]:
    rocr = env.get("ROCR_VISIBLE_DEVICES")
    hip_var = "CUDA_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" not in env else "HIP_VISIBLE_DEVICES"
    hip = env.get(hip_var)
    visible = _select(inv, _select(inv, inv.gpus, rocr, by_uuid=True), hip, by_uuid=False)
    shown = [_shown(v, x) for v, x in (("ROCR_VISIBLE_DEVICES", rocr), (hip_var, hip)) if x]
    return [(g, None) for g in visible], ", ".join(shown) or _shown("HIP_VISIBLE_DEVICES", None)


def _by_torch_uuids(
    inv: Inventory, torch_uuids: Mapping[int, str], warnings: list[str]
) -> list[tuple[int, Gpu, str | None]]:
    """torch's devices by the UUIDs torch reports; empty (with a warning) when the library
    lacks one."""
    chosen = []
    for ti, uuid in sorted(torch_uuids.items()):
        gpu, mig = inv.by_uuid(uuid)
        if gpu is None:
            warnings.append(
                f"torch device cuda:{ti} has UUID {uuid}, which {inv.lib.api} does not "
                f"list; falling back to {inv.lib.visible_devices_var}"
            )
            return []
        chosen.append((ti, gpu, mig))
    return chosen


def _by_env(
    inv: Inventory, torch_indices: Sequence[int] | None, env: Mapping[str, str], warnings: list[str]
) -> list[tuple[int, Gpu, str | None]]:
    """torch's devices as the visibility variables number them. Raises
    ``DeviceMappingError``."""
    visible, shown = visible_devices(inv, env)
    wanted = list(torch_indices) if torch_indices is not None else list(range(len(visible)))
    chosen = []
    for ti in wanted:
        if not 0 <= ti < len(visible):
            raise DeviceMappingError(
                f"torch device cuda:{ti} is not visible: {shown}, which leaves "
                f"{len(visible)} of {inv.lib.api}'s {len(inv.gpus)} GPUs visible"
            )
        chosen.append((ti, visible[ti][0], visible[ti][1]))
    if inv.lib.visible_devices_var != "CUDA_VISIBLE_DEVICES":
        return chosen
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    by_int = cvd is None or any(re.fullmatch(r"\s*\d+\s*", e) for e in cvd.split(","))
    names = {inv.lib.name(g) for g in inv.gpus}
    if by_int and len(names) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        warnings.append(
            "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA may number "
            "them differently from NVML; set CUDA_DEVICE_ORDER=PCI_BUS_ID so that the "
            "measured GPU is the one torch used"
        )
    return chosen


def resolve_devices(
    lib: GpuLibrary,
    torch_indices: Sequence[int] | None,
    env: Mapping[str, str],
    torch_uuids: Mapping[int, str] | None = None,
) -> tuple[list[tuple[DeviceInfo, Gpu]], list[str]]:
    """Map torch device indices to NVML GPUs. Returns ([(DeviceInfo, GPU)], warnings).

    ``torch_indices`` None means every visible device. Raises ``DeviceMappingError``.
    """
    inv = Inventory(lib)
    warnings: list[str] = []
    chosen = _by_torch_uuids(inv, torch_uuids, warnings) if torch_uuids else []
    if not chosen:
        chosen = _by_env(inv, torch_indices, env, warnings)
    out: list[tuple[DeviceInfo, Gpu]] = []
    done: dict[str, int] = {}
    for ti, gpu, mig in chosen:
        if mig:
            warnings.append(
                f"torch device cuda:{ti} is MIG instance {mig}; NVML power and energy "
                f"are for the whole GPU {gpu.uuid}, shared with its other instances "
                "(the energy is judged invalid: validity check whole_gpu)"
            )
        if gpu.uuid in done:
            warnings.append(
                f"torch devices cuda:{done[gpu.uuid]} and cuda:{ti} are on the same "
                f"GPU {gpu.uuid}; it is measured once"
            )
            continue
        done[gpu.uuid] = ti
        out.append((describe(lib.facts(gpu), gpu, ti, mig, lib.vendor), gpu))
    return out, warnings

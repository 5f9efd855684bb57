"""Which of the vendor library's GPUs a run uses: torch device index -> GPU, matched by UUID.

torch numbers the devices the vendor's visibility variables leave visible (cuda:0 is the first of
them); NVML and amdsmi number every GPU of the machine and ignore those variables. So cuda:0 is
NVML device 2 under ``CUDA_VISIBLE_DEVICES=2,0``. The mapping:

1. When torch has the GPUs, ask it for each device's UUID (``get_device_properties(i).uuid``) and
   find the library's GPU with that UUID. This is exact whatever the visibility variables say.
2. Otherwise the vendor library parses its own visibility variables the way its runtime does
   (``GpuLibrary.visible``: NVIDIA's in ``llem.devices.nvidia``, AMD's in ``llem.devices.amd``),
   and says when torch may number the GPUs otherwise (``GpuLibrary.order_warning``).

A MIG instance is measured through its parent GPU (NVML reports power and energy per physical GPU),
with a warning, and its energy is judged invalid (``llem.measure.validity``'s ``whole_gpu``); a GPU
used by several torch devices is measured once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.devices.gpu import Gpu, GpuFacts, GpuLibrary, Inventory


class DeviceMappingError(Exception):
    """A requested torch device has no GPU in the vendor library; ``str(exc)`` says why."""


@dataclass(frozen=True)
class DeviceInfo:
    """A measured GPU. Memory in MB (2**20 bytes, as torch figures); bandwidth in bytes/s.
    ``vendor_index`` is the GPU's number in its vendor library (NVML: PCI bus order; amdsmi: its
    processor handles' order); ``vendor`` is the library's ``vendor``."""

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
    visible, shown = inv.lib.visible(inv, env)
    wanted = list(torch_indices) if torch_indices is not None else list(range(len(visible)))
    chosen = []
    for ti in wanted:
        if not 0 <= ti < len(visible):
            raise DeviceMappingError(
                f"torch device cuda:{ti} is not visible: {shown}, which leaves "
                f"{len(visible)} of {inv.lib.api}'s {len(inv.gpus)} GPUs visible"
            )
        chosen.append((ti, visible[ti][0], visible[ti][1]))
    warning = inv.lib.order_warning(inv, env)
    if warning:
        warnings.append(warning)
    return chosen


def resolve_devices(
    lib: GpuLibrary,
    torch_indices: Sequence[int] | None,
    env: Mapping[str, str],
    torch_uuids: Mapping[int, str] | None = None,
) -> tuple[list[tuple[DeviceInfo, Gpu]], list[str]]:
    """Map torch device indices to the library's GPUs. Returns ([(DeviceInfo, GPU)], warnings).

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

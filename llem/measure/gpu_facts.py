"""What a GPU is, as NVML reports it: name, total memory, peak memory bandwidth, and its power
limits (the enforced one, and the default it ships with). Asked through the ``Nvml`` wrapper of
``llem.measure.nvml`` (its ``module`` is pynvml or a test double); NVML's units are converted
here: bytes to MB (2**20 bytes), mW to W. A figure NVML cannot report is None, with its reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llem.measure.nvml import MB, Gpu, Nvml, error_text


@dataclass(frozen=True)
class GpuFacts:
    """What a GPU is: name, total memory (MB), peak memory bandwidth (bytes/s), enforced power
    limit (W) and the default power limit it ships with (W, whatever limit is set now); each None
    that NVML cannot report has its reason in ``null_reasons``."""

    name: str
    memory_total_mb: float | None
    memory_bandwidth_bytes_per_s: float | None
    power_limit_w: float | None
    null_reasons: Mapping[str, str] = field(default_factory=dict)
    default_power_limit_w: float | None = None


def gpu_facts(nvml: Nvml, gpu: Gpu) -> GpuFacts:
    """Name, total memory, memory bandwidth and power limits of one physical GPU."""
    n, h, reasons = nvml.module, gpu.handle, {}
    name = nvml.name(gpu)
    total_mb: float | None = None
    try:
        total_mb = n.nvmlDeviceGetMemoryInfo(h).total / MB
    except Exception as exc:
        if not nvml.is_not_supported(exc):
            raise
        reasons["memory_total_mb"] = f"NVML cannot report total memory ({error_text(exc)})"
    bandwidth, why = memory_bandwidth(nvml, gpu)
    if why:
        reasons["memory_bandwidth_bytes_per_s"] = why
    limit_w = _watts(nvml, h, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_w", reasons)
    default_w = _watts(
        nvml, h, "nvmlDeviceGetPowerManagementDefaultLimit", "default_power_limit_w", reasons
    )
    return GpuFacts(name, total_mb, bandwidth, limit_w, reasons, default_w)


def memory_bandwidth(nvml: Nvml, gpu: Gpu) -> tuple[float | None, str | None]:
    """Peak memory bandwidth in bytes/s = bus width (bits) / 8 * max memory clock (Hz) * 2."""
    n, h = nvml.module, gpu.handle
    try:
        bus_bits = n.nvmlDeviceGetMemoryBusWidth(h)
        mem_mhz = n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)
    except Exception as exc:
        if nvml.is_not_supported(exc) or nvml.is_error(exc):
            return None, f"NVML cannot report memory bus width or clock ({error_text(exc)})"
        raise
    if not bus_bits or not mem_mhz:
        why = f"NVML reported bus width {bus_bits} bits and max memory clock {mem_mhz} MHz"
        return None, why
    return bus_bits / 8 * mem_mhz * 1e6 * 2, None


def _watts(
    nvml: Nvml, handle: Any, function: str, key: str, reasons: dict[str, str]
) -> float | None:
    """``pynvml.<function>(handle)`` in W; None with its reason under ``reasons[key]``."""
    try:
        return float(getattr(nvml.module, function)(handle)) / 1000.0
    except Exception as exc:
        if not (nvml.is_not_supported(exc) or nvml.is_error(exc)):
            raise
        what = key.removesuffix("_w").replace("_", " ")
        reasons[key] = f"NVML cannot report the {what} ({error_text(exc)})"
        return None

"""What a GPU reading is, whatever the vendor: one sample of a device, and a process on it.

The vendor modules (``nvidia``, ``amd``) fill these in their own units converted once: W, J, MHz,
degrees C, MB (2**20 bytes, the unit of torch's memory figures). ``throttle_mask`` uses the bits of
``llem.devices.throttle`` (NVML's numbering; a vendor with other reasons maps its own onto them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sample:
    """One reading of one device. ``time_s`` is on the session clock; None = not readable."""

    time_s: float
    device: str  # the GPU's UUID (or the replay trace's device name)
    power_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_mask: int | None = None
    memory_used_mb: float | None = None  # MB = 2**20 bytes
    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None
    # (column, error text) for each reading that failed in this sample; its column is None
    errors: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class OtherProcess:
    """A compute process other than this one on a measured GPU (memory in MB, None if hidden)."""

    device: str
    pid: int
    used_memory_mb: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "pid": self.pid, "used_memory_mb": self.used_memory_mb}

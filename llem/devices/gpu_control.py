"""The GPU's power limit and locked clocks: read, checked against what the GPU allows, set, reset.

Vendor-free: every read and change is a primitive of the vendor's ``GpuLibrary``
(``llem.devices.nvidia_control`` for NVML, ``llem.devices.amd`` for amdsmi), in W and MHz. The
previous power limit is read before a change so that a restore puts back what was there; a
library that cannot tell a lock someone else set is why llem resets only the locks it set itself.

Setting any of them needs root (or CAP_SYS_ADMIN). ``permission_problem`` finds out without
changing anything: it sets the power limit to the value it has now (NVML checks the caller's rights
before it looks at the value, so a user without them gets ``NVMLError_NoPermission``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from llem.devices.gpu import Gpu, GpuControlError, GpuLibrary

T = TypeVar("T")

__all__ = ["GpuControl", "GpuControlError", "GpuState", "clock_problem", "power_problem"]

PERMISSION_HINT = (
    "setting the power limit or clocks needs root or CAP_SYS_ADMIN, as the vendors' tools "
    "(`nvidia-smi -pl`, `amd-smi set`) do: run llem with sudo (or as root, e.g. a container "
    "started with --cap-add SYS_ADMIN)"
)


# how long a power-limit change may take to be enforced before llem reads it back
ENFORCE_WAIT_S = 2.0


@dataclass(frozen=True)
class GpuState:
    """One GPU's settings now, and what its library allows; watts and MHz. A None has its reason
    in ``null_reasons`` (the library could not report it). ``index`` is the vendor's numbering."""

    uuid: str
    index: int
    power_limit_w: float | None  # the limit set (by anyone)
    enforced_power_limit_w: float | None  # what the GPU enforces
    power_range_w: tuple[float, float] | None  # the range a limit may be set in
    sm_clock_mhz: int | None  # running now
    memory_clock_mhz: int | None  # running now
    null_reasons: dict[str, str] = field(default_factory=dict)


class GpuControl:
    """Reads and changes one or more GPUs' power limit and locked clocks through a vendor
    library's primitives (``GpuLibrary``)."""

    def __init__(self, lib: GpuLibrary) -> None:
        self.lib = lib

    @staticmethod
    def _read(reasons: dict[str, str], key: str, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except GpuControlError as exc:
            reasons[key] = str(exc)
            return None

    # ------------------------------------------------------------------ reading
    def state(self, gpu: Gpu) -> GpuState:
        """What ``gpu`` is set to and runs at now."""
        r: dict[str, str] = {}
        lib = self.lib
        return GpuState(
            uuid=gpu.uuid,
            index=gpu.index,
            power_limit_w=self._read(r, "power_limit_w", lambda: lib.power_limit_w(gpu)),
            enforced_power_limit_w=self._read(
                r, "enforced_power_limit_w", lambda: lib.enforced_power_limit_w(gpu)
            ),
            power_range_w=self._read(r, "power_range_w", lambda: lib.power_limit_range_w(gpu)),
            sm_clock_mhz=self._read(r, "sm_clock_mhz", lambda: lib.clock_mhz(gpu, "sm")),
            memory_clock_mhz=self._read(
                r, "memory_clock_mhz", lambda: lib.clock_mhz(gpu, "memory")
            ),
            null_reasons=r,
        )

    def supported_memory_clocks(self, gpu: Gpu) -> list[int]:
        """The memory clocks (MHz) ``gpu`` can run at, highest first. Raises GpuControlError."""
        return self.lib.supported_clocks_mhz(gpu, "memory")

    def supported_sm_clocks(self, gpu: Gpu) -> list[int]:
        """The SM clocks (MHz) ``gpu`` can run at under any of its memory clocks, highest first.
        Raises GpuControlError."""
        return self.lib.supported_clocks_mhz(gpu, "sm")

    # ------------------------------------------------------------------ changing
    def set_power_limit(self, gpu: Gpu, watts: float) -> None:
        """Set the limit, then wait (up to ``ENFORCE_WAIT_S``) until the GPU enforces it: on an
        H100 the enforced limit read right after the call was still the old one."""
        self.lib.set_power_limit_w(gpu, watts)
        deadline = time.monotonic() + ENFORCE_WAIT_S
        while time.monotonic() < deadline:
            try:
                enforced = self.lib.enforced_power_limit_w(gpu)
            except GpuControlError:  # no enforced reading: nothing to wait for
                return
            if abs(enforced - watts) <= 1.0:  # another, lower limit may keep it below
                return
            time.sleep(0.01)

    def lock_sm_clocks(self, gpu: Gpu, lo: int, hi: int) -> None:
        self.lib.lock_clocks(gpu, "sm", lo, hi)

    def reset_sm_clocks(self, gpu: Gpu) -> None:
        self.lib.reset_clocks(gpu, "sm")

    def lock_memory_clocks(self, gpu: Gpu, lo: int, hi: int) -> None:
        self.lib.lock_clocks(gpu, "memory", lo, hi)

    def reset_memory_clocks(self, gpu: Gpu) -> None:
        self.lib.reset_clocks(gpu, "memory")

    def permission_problem(self, gpu: Gpu) -> str | None:
        """Why llem may not change ``gpu`` (None when it may, or when the library cannot tell).

        Changes nothing: the power limit is set to the value it has now (NVML checks the caller's
        rights before it looks at the value).
        """
        try:
            current = self.lib.power_limit_w(gpu)
            self.lib.set_power_limit_w(gpu, current)
        except GpuControlError as exc:
            if exc.kind == "permission":
                return f"changing GPU {gpu.index}: no permission ({exc.detail}): {PERMISSION_HINT}"
            return None  # not supported: the change itself says so
        return None


# ---------------------------------------------------------------------- checks against the GPU
def power_problem(state: GpuState, watts: float) -> str | None:
    """Why ``watts`` cannot be ``state``'s GPU's power limit (None when it can)."""
    if state.power_range_w is None:
        why = state.null_reasons.get("power_range_w", "the GPU reports no allowed range")
        return f"gpu.power_limit_w={watts:g} cannot be set on GPU {state.index} ({why})"
    lo, hi = state.power_range_w
    if not lo <= watts <= hi:
        return (
            f"gpu.power_limit_w={watts:g} is outside GPU {state.index}'s power limit "
            f"range (allowed: {lo:g} to {hi:g} W)"
        )
    return None


def clock_problem(
    key: str, index: int, wanted: tuple[int, int], supported: list[int]
) -> str | None:
    """Why the locked range ``wanted`` cannot be set, given the ``supported`` clocks (MHz)."""
    if not supported:
        return f"{key}={_range(wanted)} cannot be set on GPU {index} (no clocks are listed)"
    lo, hi = min(supported), max(supported)
    if wanted[0] < lo or wanted[1] > hi:
        return (
            f"{key}={_range(wanted)} is outside GPU {index}'s supported clocks "
            f"(allowed: {lo} to {hi} MHz; {_some(supported)})"
        )
    return None


def _range(wanted: tuple[int, int]) -> str:
    return str(wanted[0]) if wanted[0] == wanted[1] else f"{wanted[0]}-{wanted[1]}"


def _some(clocks: list[int]) -> str:
    """A short list of supported clocks: all of them when few, else the ends and a count."""
    if len(clocks) <= 6:
        return "supported: " + ", ".join(map(str, clocks))
    return f"{len(clocks)} values from {clocks[-1]} to {clocks[0]}"

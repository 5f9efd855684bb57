"""The GPU's power limit and locked clocks: read, checked against NVML's constraints, set, reset.

Everything goes through the ``Nvml`` wrapper of ``llem.measure.nvml`` (its ``module`` is pynvml or
a test double); units are converted here once: NVML's milliwatts to watts.

- Power limit: ``nvmlDeviceGetPowerManagementLimit`` is the limit set (by anyone), its allowed
  range ``nvmlDeviceGetPowerManagementLimitConstraints``; ``nvmlDeviceGetEnforcedPowerLimit`` is
  what the GPU enforces (the lowest of every limit in force). ``nvmlDeviceSetPowerManagementLimit``
  sets it; the previous value is read first so that a restore puts back what was there.
- Clocks: ``nvmlDeviceSetGpuLockedClocks(min, max)`` / ``nvmlDeviceSetMemoryLockedClocks`` lock a
  range, ``nvmlDeviceReset*LockedClocks`` unlock it. NVML has no getter of a lock someone else set,
  so llem resets only the locks it set itself; the clock running now is
  ``nvmlDeviceGetClockInfo``, the allowed values ``nvmlDeviceGetSupportedMemoryClocks`` and
  ``nvmlDeviceGetSupportedGraphicsClocks`` (per memory clock).

Setting any of them needs root or CAP_SYS_ADMIN. ``permission_problem`` finds out without changing
anything: it sets the power limit to the value it has now (NVML checks the caller's rights before it
looks at the value, so a user without them gets ``NVMLError_NoPermission``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from llem.measure.nvml import Gpu, Nvml, error_text

PERMISSION_HINT = (
    "setting the power limit or clocks needs root or CAP_SYS_ADMIN, as `nvidia-smi -pl` does: "
    "run llem with sudo (or as root, e.g. a container started with --cap-add SYS_ADMIN)"
)


# how long a power-limit change may take to be enforced before llem reads it back
ENFORCE_WAIT_S = 2.0


class GpuControlError(Exception):
    """A read or a change NVML refused; ``kind`` is ``permission``, ``not_supported`` or
    ``failed``, ``str(exc)`` says what and why."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class GpuState:
    """One GPU's settings now, and what NVML allows; watts and MHz. A None has its reason in
    ``null_reasons`` (NVML could not report it)."""

    uuid: str
    nvml_index: int
    power_limit_w: float | None  # the limit set (nvmlDeviceGetPowerManagementLimit)
    enforced_power_limit_w: float | None  # what the GPU enforces
    power_range_w: tuple[float, float] | None  # nvmlDeviceGetPowerManagementLimitConstraints
    sm_clock_mhz: int | None  # running now
    memory_clock_mhz: int | None  # running now
    null_reasons: dict[str, str] = field(default_factory=dict)


class GpuControl:
    """Reads and changes one or more GPUs' power limit and locked clocks through ``nvml``."""

    def __init__(self, nvml: Nvml) -> None:
        self.nvml = nvml
        self.n: Any = nvml.module

    # ------------------------------------------------------------------ errors
    def _error(self, exc: BaseException, what: str) -> GpuControlError:
        n = self.n
        code = getattr(exc, "value", None)
        if code == n.NVML_ERROR_NO_PERMISSION:
            return GpuControlError(f"{what}: no permission ({error_text(exc)})", "permission")
        if self.nvml.is_not_supported(exc):
            return GpuControlError(f"{what}: not supported ({error_text(exc)})", "not_supported")
        return GpuControlError(f"{what}: {error_text(exc)}", "failed")

    def _call(self, what: str, fn: str, *args: Any) -> Any:
        """``pynvml.<fn>(*args)``; an NVML error (or a missing function) becomes a
        ``GpuControlError`` saying ``what`` failed."""
        try:
            return getattr(self.n, fn)(*args)
        except Exception as exc:
            if self.nvml.is_error(exc) or isinstance(exc, AttributeError):
                raise self._error(exc, what) from exc
            raise

    def _read(self, gpu: Gpu, key: str, fn: str, *args: Any, reasons: dict[str, str]) -> Any:
        try:
            return self._call(f"reading {key} of GPU {gpu.index}", fn, gpu.handle, *args)
        except GpuControlError as exc:
            reasons[key] = str(exc)
            return None

    # ------------------------------------------------------------------ reading
    def state(self, gpu: Gpu) -> GpuState:
        """What ``gpu`` is set to and runs at now."""
        r: dict[str, str] = {}
        limit = self._read(gpu, "power_limit_w", "nvmlDeviceGetPowerManagementLimit", reasons=r)
        enforced = self._read(
            gpu, "enforced_power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", reasons=r
        )
        bounds = self._read(
            gpu, "power_range_w", "nvmlDeviceGetPowerManagementLimitConstraints", reasons=r
        )
        sm = self._read(
            gpu, "sm_clock_mhz", "nvmlDeviceGetClockInfo", self.n.NVML_CLOCK_SM, reasons=r
        )
        mem = self._read(
            gpu, "memory_clock_mhz", "nvmlDeviceGetClockInfo", self.n.NVML_CLOCK_MEM, reasons=r
        )
        return GpuState(
            uuid=gpu.uuid,
            nvml_index=gpu.index,
            power_limit_w=None if limit is None else limit / 1000.0,
            enforced_power_limit_w=None if enforced is None else enforced / 1000.0,
            power_range_w=None if bounds is None else (bounds[0] / 1000.0, bounds[1] / 1000.0),
            sm_clock_mhz=None if sm is None else int(sm),
            memory_clock_mhz=None if mem is None else int(mem),
            null_reasons=r,
        )

    def supported_memory_clocks(self, gpu: Gpu) -> list[int]:
        """The memory clocks (MHz) ``gpu`` can run at, highest first. Raises GpuControlError."""
        what = f"reading the supported memory clocks of GPU {gpu.index}"
        found = self._call(what, "nvmlDeviceGetSupportedMemoryClocks", gpu.handle)
        return sorted((int(c) for c in found), reverse=True)

    def supported_sm_clocks(self, gpu: Gpu) -> list[int]:
        """The SM clocks (MHz) ``gpu`` can run at under any of its memory clocks, highest first.
        Raises GpuControlError."""
        what = f"reading the supported SM clocks of GPU {gpu.index}"
        out: set[int] = set()
        for mem in self.supported_memory_clocks(gpu):
            found = self._call(what, "nvmlDeviceGetSupportedGraphicsClocks", gpu.handle, mem)
            out.update(int(c) for c in found)
        return sorted(out, reverse=True)

    # ------------------------------------------------------------------ changing
    def set_power_limit(self, gpu: Gpu, watts: float) -> None:
        """Set the limit, then wait (up to ``ENFORCE_WAIT_S``) until the GPU enforces it: on an
        H100 the enforced limit read right after the call was still the old one."""
        what = f"setting the power limit of GPU {gpu.index} to {watts:g} W"
        milliwatts = int(round(watts * 1000))
        self._call(what, "nvmlDeviceSetPowerManagementLimit", gpu.handle, milliwatts)
        deadline = time.monotonic() + ENFORCE_WAIT_S
        while time.monotonic() < deadline:
            try:
                enforced = self.n.nvmlDeviceGetEnforcedPowerLimit(gpu.handle)
            except Exception:  # no enforced reading: nothing to wait for
                return
            if abs(enforced - milliwatts) <= 1000:  # another, lower limit may keep it below
                return
            time.sleep(0.01)

    def lock_sm_clocks(self, gpu: Gpu, lo: int, hi: int) -> None:
        what = f"locking the SM clock of GPU {gpu.index} to {lo}-{hi} MHz"
        self._call(what, "nvmlDeviceSetGpuLockedClocks", gpu.handle, lo, hi)

    def reset_sm_clocks(self, gpu: Gpu) -> None:
        what = f"unlocking the SM clock of GPU {gpu.index}"
        self._call(what, "nvmlDeviceResetGpuLockedClocks", gpu.handle)

    def lock_memory_clocks(self, gpu: Gpu, lo: int, hi: int) -> None:
        what = f"locking the memory clock of GPU {gpu.index} to {lo}-{hi} MHz"
        self._call(what, "nvmlDeviceSetMemoryLockedClocks", gpu.handle, lo, hi)

    def reset_memory_clocks(self, gpu: Gpu) -> None:
        what = f"unlocking the memory clock of GPU {gpu.index}"
        self._call(what, "nvmlDeviceResetMemoryLockedClocks", gpu.handle)

    def permission_problem(self, gpu: Gpu) -> str | None:
        """Why llem may not change ``gpu`` (None when it may, or when NVML cannot tell).

        Changes nothing: the power limit is set to the value it has now.
        """
        try:
            current = self._call(
                f"reading the power limit of GPU {gpu.index}",
                "nvmlDeviceGetPowerManagementLimit",
                gpu.handle,
            )
            self._call(
                f"changing GPU {gpu.index}",
                "nvmlDeviceSetPowerManagementLimit",
                gpu.handle,
                current,
            )
        except GpuControlError as exc:
            if exc.kind == "permission":
                return f"{exc}: {PERMISSION_HINT}"
            return None  # not supported: the change itself says so
        return None


# ---------------------------------------------------------------------- checks against NVML
def power_problem(state: GpuState, watts: float) -> str | None:
    """Why ``watts`` cannot be ``state``'s GPU's power limit (None when it can)."""
    if state.power_range_w is None:
        why = state.null_reasons.get("power_range_w", "NVML reports no allowed range")
        return f"gpu.power_limit_w={watts:g} cannot be set on GPU {state.nvml_index} ({why})"
    lo, hi = state.power_range_w
    if not lo <= watts <= hi:
        return (
            f"gpu.power_limit_w={watts:g} is outside GPU {state.nvml_index}'s power limit "
            f"range (allowed: {lo:g} to {hi:g} W)"
        )
    return None


def clock_problem(
    key: str, index: int, wanted: tuple[int, int], supported: list[int]
) -> str | None:
    """Why the locked range ``wanted`` cannot be set, given the ``supported`` clocks (MHz)."""
    if not supported:
        return f"{key}={_range(wanted)} cannot be set on GPU {index} (NVML lists no clocks)"
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

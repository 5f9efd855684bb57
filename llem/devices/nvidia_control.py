"""NVML's side of GPU control: the power limit and clock locks, in W and MHz.

A mixin of ``llem.devices.nvidia.Nvml`` (its ``module`` is pynvml or a test double); the logic
around these primitives (read back, wait for enforcement, checks, restore) is vendor-free, in
``llem.devices.gpu_control``.

- Power limit: ``nvmlDeviceGetPowerManagementLimit`` is the limit set (by anyone), its allowed
  range ``nvmlDeviceGetPowerManagementLimitConstraints``; ``nvmlDeviceGetEnforcedPowerLimit`` is
  what the GPU enforces (the lowest of every limit in force). ``nvmlDeviceSetPowerManagementLimit``
  sets it.
- Clocks: ``nvmlDeviceSetGpuLockedClocks(min, max)`` / ``nvmlDeviceSetMemoryLockedClocks`` lock a
  range, ``nvmlDeviceReset*LockedClocks`` unlock it. NVML has no getter of a lock someone else set;
  the clock running now is ``nvmlDeviceGetClockInfo``, the allowed values
  ``nvmlDeviceGetSupportedMemoryClocks`` and ``nvmlDeviceGetSupportedGraphicsClocks`` (per memory
  clock).

Every NVML error (or a function missing from an older nvidia-ml-py) becomes a ``GpuControlError``
whose ``kind`` says whether it was a permission, an unsupported feature or another failure.
"""

from __future__ import annotations

from typing import Any

from llem.devices.gpu import Gpu, GpuControlError, error_text

_LOCK = {"sm": "nvmlDeviceSetGpuLockedClocks", "memory": "nvmlDeviceSetMemoryLockedClocks"}
_RESET = {"sm": "nvmlDeviceResetGpuLockedClocks", "memory": "nvmlDeviceResetMemoryLockedClocks"}
_WHICH = {"sm": "SM", "memory": "memory"}


class NvmlControl:
    """The control primitives of ``Nvml`` (which supplies ``module``, ``is_error`` and
    ``is_not_supported``)."""

    module: Any

    def is_error(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def is_not_supported(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _control_error(self, exc: BaseException, what: str) -> GpuControlError:
        code, text = getattr(exc, "value", None), error_text(exc)
        if code == self.module.NVML_ERROR_NO_PERMISSION:
            return GpuControlError(f"{what}: no permission ({text})", "permission", text)
        if self.is_not_supported(exc):
            return GpuControlError(f"{what}: not supported ({text})", "not_supported", text)
        return GpuControlError(f"{what}: {text}", "failed", text)

    def _call(self, what: str, fn: str, *args: Any) -> Any:
        """``pynvml.<fn>(*args)``; an NVML error (or a missing function) becomes a
        ``GpuControlError`` saying ``what`` failed."""
        try:
            return getattr(self.module, fn)(*args)
        except Exception as exc:
            if self.is_error(exc) or isinstance(exc, AttributeError):
                raise self._control_error(exc, what) from exc
            raise

    def power_limit_w(self, gpu: Gpu) -> float:
        what = f"reading power_limit_w of GPU {gpu.index}"
        return float(self._call(what, "nvmlDeviceGetPowerManagementLimit", gpu.handle)) / 1000.0

    def enforced_power_limit_w(self, gpu: Gpu) -> float:
        what = f"reading enforced_power_limit_w of GPU {gpu.index}"
        return float(self._call(what, "nvmlDeviceGetEnforcedPowerLimit", gpu.handle)) / 1000.0

    def power_limit_range_w(self, gpu: Gpu) -> tuple[float, float]:
        what = f"reading power_range_w of GPU {gpu.index}"
        lo, hi = self._call(what, "nvmlDeviceGetPowerManagementLimitConstraints", gpu.handle)
        return lo / 1000.0, hi / 1000.0

    def set_power_limit_w(self, gpu: Gpu, watts: float) -> None:
        what = f"setting the power limit of GPU {gpu.index} to {watts:g} W"
        milliwatts = int(round(watts * 1000))
        self._call(what, "nvmlDeviceSetPowerManagementLimit", gpu.handle, milliwatts)

    def clock_mhz(self, gpu: Gpu, domain: str) -> int:
        clock = self.module.NVML_CLOCK_SM if domain == "sm" else self.module.NVML_CLOCK_MEM
        key = "sm_clock_mhz" if domain == "sm" else "memory_clock_mhz"
        what = f"reading {key} of GPU {gpu.index}"
        return int(self._call(what, "nvmlDeviceGetClockInfo", gpu.handle, clock))

    def supported_clocks_mhz(self, gpu: Gpu, domain: str) -> list[int]:
        """The clocks (MHz) ``gpu`` can run at, highest first; SM clocks under any memory clock."""
        what = f"reading the supported {_WHICH[domain]} clocks of GPU {gpu.index}"
        memory = [
            int(c) for c in self._call(what, "nvmlDeviceGetSupportedMemoryClocks", gpu.handle)
        ]
        if domain == "memory":
            return sorted(memory, reverse=True)
        out: set[int] = set()
        for mem in memory:
            found = self._call(what, "nvmlDeviceGetSupportedGraphicsClocks", gpu.handle, mem)
            out.update(int(c) for c in found)
        return sorted(out, reverse=True)

    def lock_clocks(self, gpu: Gpu, domain: str, lo: int, hi: int) -> None:
        what = f"locking the {_WHICH[domain]} clock of GPU {gpu.index} to {lo}-{hi} MHz"
        self._call(what, _LOCK[domain], gpu.handle, lo, hi)

    def reset_clocks(self, gpu: Gpu, domain: str) -> None:
        what = f"unlocking the {_WHICH[domain]} clock of GPU {gpu.index}"
        self._call(what, _RESET[domain], gpu.handle)

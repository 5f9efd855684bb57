"""amdsmi's side of GPU control: the power cap and clock ranges, in W and MHz.

A mixin of ``llem.devices.amd.AmdSmi``; the logic around these primitives (read back, checks,
restore) is vendor-free, in ``llem.devices.gpu_control``.

- Power cap: ``amdsmi_get_power_cap_info`` gives the cap set now, its allowed range and the
  default, all in uW; ``amdsmi_set_power_cap(handle, 0, uW)`` sets it. amdsmi has no separate
  "enforced" limit: the cap set is the one enforced.
- Clocks: ``amdsmi_set_gpu_clk_range(handle, min, max, AmdSmiClkType.GFX/MEM)`` bounds a clock
  (MHz); ``amdsmi_set_gpu_perf_level(handle, AmdSmiDevPerfLevel.AUTO)`` hands clocks back to the
  driver (llem's reset). ``amdsmi_get_clock_info`` gives the clock now and the part's min/max.

Every amdsmi error becomes a ``GpuControlError``: ``permission`` for AMDSMI_STATUS_NO_PERM,
``not_supported`` for NOT_SUPPORTED/NOT_YET_IMPLEMENTED (or a function this amdsmi lacks),
``failed`` for the rest.
"""

from __future__ import annotations

import threading
from typing import Any

from llem.devices.gpu import Gpu, GpuControlError, error_text

STATUS_NO_PERM = 10  # amdsmi_wrapper.AMDSMI_STATUS_NO_PERM
_WHICH = {"sm": "GFX", "memory": "memory"}


class AmdSmiControl:
    """The control primitives of ``AmdSmi`` (which supplies ``module``, ``lock``, ``is_error``
    and ``is_not_supported``)."""

    module: Any
    lock: threading.RLock

    def is_error(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def is_not_supported(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _control_error(self, exc: BaseException, what: str) -> GpuControlError:
        text = error_text(exc)
        if getattr(exc, "err_code", None) == STATUS_NO_PERM:
            return GpuControlError(f"{what}: no permission ({text})", "permission", text)
        if self.is_not_supported(exc):
            return GpuControlError(f"{what}: not supported ({text})", "not_supported", text)
        return GpuControlError(f"{what}: {text}", "failed", text)

    def _ctl(self, what: str, fn: str, *args: Any) -> Any:
        """``amdsmi.<fn>(*args)`` under the lock; an amdsmi error (or a missing function)
        becomes a ``GpuControlError`` saying ``what`` failed."""
        try:
            with self.lock:
                return getattr(self.module, fn)(*args)
        except Exception as exc:
            if self.is_error(exc) or isinstance(exc, AttributeError):
                raise self._control_error(exc, what) from exc
            raise

    def _caps(self, gpu: Gpu, what: str) -> dict[str, Any]:
        caps: dict[str, Any] = self._ctl(what, "amdsmi_get_power_cap_info", gpu.handle)
        return caps

    def power_limit_w(self, gpu: Gpu) -> float:
        what = f"reading power_limit_w of GPU {gpu.index}"
        return _w(self._caps(gpu, what)["power_cap"], what)

    def enforced_power_limit_w(self, gpu: Gpu) -> float:
        """The cap set now: amdsmi reports no other enforced limit."""
        what = f"reading enforced_power_limit_w of GPU {gpu.index}"
        return _w(self._caps(gpu, what)["power_cap"], what)

    def power_limit_range_w(self, gpu: Gpu) -> tuple[float, float]:
        what = f"reading power_range_w of GPU {gpu.index}"
        caps = self._caps(gpu, what)
        return _w(caps["min_power_cap"], what), _w(caps["max_power_cap"], what)

    def set_power_limit_w(self, gpu: Gpu, watts: float) -> None:
        what = f"setting the power cap of GPU {gpu.index} to {watts:g} W"
        self._ctl(what, "amdsmi_set_power_cap", gpu.handle, 0, int(round(watts * 1e6)))

    def _clk_type(self, domain: str) -> Any:
        kinds = self.module.AmdSmiClkType
        return kinds.GFX if domain == "sm" else kinds.MEM

    def _clock_info(self, gpu: Gpu, domain: str, what: str) -> dict[str, Any]:
        info: dict[str, Any] = self._ctl(
            what, "amdsmi_get_clock_info", gpu.handle, self._clk_type(domain)
        )
        return info

    def clock_mhz(self, gpu: Gpu, domain: str) -> int:
        key = "sm_clock_mhz" if domain == "sm" else "memory_clock_mhz"
        what = f"reading {key} of GPU {gpu.index}"
        clk = self._clock_info(gpu, domain, what)["clk"]
        if clk == "N/A":
            raise GpuControlError(f"{what}: amdsmi reports N/A", "not_supported", "N/A")
        return int(clk)

    def supported_clocks_mhz(self, gpu: Gpu, domain: str) -> list[int]:
        """The ends of the range the clock may be set in (amdsmi_get_clock_info's min_clk and
        max_clk), highest first: amdgpu takes any value between them."""
        what = f"reading the supported {_WHICH[domain]} clocks of GPU {gpu.index}"
        info = self._clock_info(gpu, domain, what)
        ends = [info.get("max_clk"), info.get("min_clk")]
        if any(e in (None, "N/A") for e in ends):
            raise GpuControlError(f"{what}: amdsmi reports N/A", "not_supported", "N/A")
        return sorted({int(e) for e in ends if e is not None}, reverse=True)

    def lock_clocks(self, gpu: Gpu, domain: str, lo: int, hi: int) -> None:
        what = f"setting the {_WHICH[domain]} clock range of GPU {gpu.index} to {lo}-{hi} MHz"
        self._ctl(
            what, "amdsmi_set_gpu_clk_range", gpu.handle, int(lo), int(hi), self._clk_type(domain)
        )

    def reset_clocks(self, gpu: Gpu, domain: str) -> None:
        """Back to the driver's automatic clocks (perf level AUTO), for every clock domain."""
        what = f"resetting the {_WHICH[domain]} clock of GPU {gpu.index}"
        auto = self.module.AmdSmiDevPerfLevel.AUTO
        self._ctl(what, "amdsmi_set_gpu_perf_level", gpu.handle, auto)


def _w(microwatts: Any, what: str) -> float:
    if microwatts in (None, "N/A"):
        raise GpuControlError(f"{what}: amdsmi reports N/A", "not_supported", "N/A")
    return float(microwatts) / 1e6

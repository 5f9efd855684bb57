"""The power-limit and clock half of the NVML test double (``llem.testing.fake_pynvml``).

A ``FakeGpu`` carries a ``FakeControl``: its allowed power range, supported clocks, the locks set,
and switches for what goes wrong (no permission, a restore that fails). ``FakeNvml`` inherits the
NVML functions below from ``ControlFunctions``. The limit set is ``FakeGpu.power_limit_mw``, so the
enforced limit (``nvmlDeviceGetEnforcedPowerLimit``) follows it, capped by ``enforced_cap_mw``.

With ``state_file`` set, every change is written there as JSON (and ``load_state`` reads it), so
a test can run llem in a subprocess over the double and look at the GPU afterwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pynvml as _real


def _default_sm_clocks() -> list[int]:
    return list(range(1980, 344, -15))  # an H100 SXM's graphics clocks, 345 to 1980 MHz


@dataclass
class FakeControl:
    power_range_mw: tuple[int, int] | None = (200_000, 700_000)  # None: not supported
    memory_clocks_mhz: list[int] = field(default_factory=lambda: [2619])
    sm_clocks_mhz: list[int] = field(default_factory=_default_sm_clocks)
    no_permission: bool = False  # every change raises NVMLError_NoPermission
    failing_restore: bool = False  # a change back to the original settings fails
    enforced_cap_mw: int | None = None  # another limit in force: enforced = min(set, this)
    # the enforced limit lags a change by this many reads (an H100 read the old value right after
    # nvmlDeviceSetPowerManagementLimit returned)
    enforce_lag_reads: int = 0
    stale_enforced: list[int] | None = None  # [value, reads left]
    sm_lock: tuple[int, int] | None = None
    memory_lock: tuple[int, int] | None = None
    original_limit_mw: int | None = None  # set on the first change
    changes: list[list[Any]] = field(default_factory=list)  # [function, args...] of each change
    state_file: Path | None = None


def _raise(code: int) -> NoReturn:
    raise _real.NVMLError(code)


class ControlFunctions:
    """NVML's power-limit and locked-clock functions over ``self.gpus`` (see ``FakeNvml``)."""

    gpus: list[Any]

    def _gpu(self, handle: Any, function: str = "") -> Any:  # FakeNvml's
        raise NotImplementedError

    def _control(self, handle: Any, function: str) -> tuple[Any, FakeControl]:
        gpu = self._gpu(handle, function)
        return gpu, gpu.control

    def _change(
        self, handle: Any, function: str, *args: Any, back: bool
    ) -> tuple[Any, FakeControl]:
        gpu, c = self._control(handle, function)
        if c.no_permission:
            _raise(_real.NVML_ERROR_NO_PERMISSION)
        if c.failing_restore and back:
            _raise(_real.NVML_ERROR_UNKNOWN)
        c.changes.append([function, *args])
        return gpu, c

    def _saved(self, gpu: Any, c: FakeControl) -> None:
        if c.state_file is not None:
            Path(c.state_file).write_text(json.dumps(state_of(gpu)), encoding="utf-8")

    # -- power limit
    def nvmlDeviceGetPowerManagementLimit(self, handle: Any) -> int:
        gpu, c = self._control(handle, "nvmlDeviceGetPowerManagementLimit")
        if gpu.power_limit_mw is None or c.power_range_mw is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        return int(gpu.power_limit_mw)

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle: Any) -> int:
        gpu, c = self._control(handle, "nvmlDeviceGetPowerManagementDefaultLimit")
        if gpu.power_limit_mw is None or c.power_range_mw is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        if gpu.default_power_limit_mw is not None:
            return int(gpu.default_power_limit_mw)
        return int(gpu.power_limit_mw if c.original_limit_mw is None else c.original_limit_mw)

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle: Any) -> list[int]:
        _, c = self._control(handle, "nvmlDeviceGetPowerManagementLimitConstraints")
        if c.power_range_mw is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        return list(c.power_range_mw)

    def nvmlDeviceSetPowerManagementLimit(self, handle: Any, limit: int) -> None:
        gpu, c = self._control(handle, "nvmlDeviceSetPowerManagementLimit")
        back = (
            c.original_limit_mw is not None and limit == c.original_limit_mw != gpu.power_limit_mw
        )
        self._change(handle, "nvmlDeviceSetPowerManagementLimit", limit, back=back)
        if c.power_range_mw is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        lo, hi = c.power_range_mw
        if not lo <= limit <= hi:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        if c.original_limit_mw is None and limit != gpu.power_limit_mw:
            c.original_limit_mw = gpu.power_limit_mw
        if c.enforce_lag_reads:
            c.stale_enforced = [enforced_mw(gpu), c.enforce_lag_reads]
        gpu.power_limit_mw = limit
        self._saved(gpu, c)

    # -- clocks
    def nvmlDeviceGetSupportedMemoryClocks(self, handle: Any) -> list[int]:
        _, c = self._control(handle, "nvmlDeviceGetSupportedMemoryClocks")
        return list(c.memory_clocks_mhz)

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle: Any, memoryClockMHz: int) -> list[int]:
        _, c = self._control(handle, "nvmlDeviceGetSupportedGraphicsClocks")
        if memoryClockMHz not in c.memory_clocks_mhz:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        return list(c.sm_clocks_mhz)

    def nvmlDeviceSetGpuLockedClocks(
        self, handle: Any, minGpuClockMHz: int, maxGpuClockMHz: int
    ) -> None:
        gpu, c = self._change(
            handle, "nvmlDeviceSetGpuLockedClocks", minGpuClockMHz, maxGpuClockMHz, back=False
        )
        c.sm_lock = (minGpuClockMHz, maxGpuClockMHz)
        self._saved(gpu, c)

    def nvmlDeviceResetGpuLockedClocks(self, handle: Any) -> None:
        gpu, c = self._change(handle, "nvmlDeviceResetGpuLockedClocks", back=True)
        c.sm_lock = None
        self._saved(gpu, c)

    def nvmlDeviceSetMemoryLockedClocks(
        self, handle: Any, minMemClockMHz: int, maxMemClockMHz: int
    ) -> None:
        gpu, c = self._change(
            handle, "nvmlDeviceSetMemoryLockedClocks", minMemClockMHz, maxMemClockMHz, back=False
        )
        c.memory_lock = (minMemClockMHz, maxMemClockMHz)
        self._saved(gpu, c)

    def nvmlDeviceResetMemoryLockedClocks(self, handle: Any) -> None:
        gpu, c = self._change(handle, "nvmlDeviceResetMemoryLockedClocks", back=True)
        c.memory_lock = None
        self._saved(gpu, c)


def enforced_mw(gpu: Any) -> int:
    """What the fake GPU enforces: the limit set, capped by any other limit in force."""
    stale = gpu.control.stale_enforced
    if stale is not None and stale[1] > 0:
        stale[1] -= 1
        return stale[0]
    cap = gpu.control.enforced_cap_mw
    return int(gpu.power_limit_mw if cap is None else min(gpu.power_limit_mw, cap))


def running_clock_mhz(gpu: Any, kind: int) -> int:
    """The clock the fake GPU runs at: the top of a lock, else its highest."""
    c = gpu.control
    if kind == _real.NVML_CLOCK_MEM:
        return c.memory_lock[1] if c.memory_lock else gpu.max_mem_clock_mhz
    return c.sm_lock[1] if c.sm_lock else 1980


def state_of(gpu: Any) -> dict[str, Any]:
    """The settings a subprocess test looks at afterwards (and ``load_state`` reads back)."""
    c = gpu.control
    return {
        "power_limit_mw": gpu.power_limit_mw,
        "sm_lock": c.sm_lock,
        "memory_lock": c.memory_lock,
        "original_limit_mw": c.original_limit_mw,
        "changes": c.changes,
    }


def load_state(gpu: Any, path: Path) -> None:
    """Put the settings a previous process left in ``path`` onto ``gpu``."""
    if not Path(path).is_file():
        return
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    c = gpu.control
    gpu.power_limit_mw = data["power_limit_mw"]
    c.sm_lock = tuple(data["sm_lock"]) if data["sm_lock"] else None
    c.memory_lock = tuple(data["memory_lock"]) if data["memory_lock"] else None
    c.original_limit_mw = data["original_limit_mw"]
    c.changes = data["changes"]

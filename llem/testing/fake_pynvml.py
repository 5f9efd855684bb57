"""A programmable stand-in for the ``pynvml`` module (nvidia-ml-py), for tests without a GPU.

Constants and the ``NVMLError`` family are taken from the real ``pynvml`` (importable here even
without a driver), so the fake raises exactly what NVML raises. Each ``FakeGpu`` is programmed with
an architecture, counter support, a power-limit range and clocks
(``llem.testing.fake_nvml_control``), a power waveform over clock time, UUIDs, MIG instances, and an
optional failure after N calls. Install with ``monkeypatch.setitem(sys.modules, "pynvml", fake)``.
"""

from __future__ import annotations

import math
import threading
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field

import pynvml as _real

from llem.testing.fake_nvml_control import (
    ControlFunctions,
    FakeControl,
    enforced_mw,
    running_clock_mhz,
)


# ---------------------------------------------------------------- waveforms (watts over time)
class Waveform:
    def power(self, t: float) -> float:
        raise NotImplementedError

    def energy(self, a: float, b: float) -> float:
        """Exact joules from a to b."""
        raise NotImplementedError


@dataclass
class Constant(Waveform):
    watts: float

    def power(self, t: float) -> float:
        return self.watts

    def energy(self, a: float, b: float) -> float:
        return self.watts * (b - a)


@dataclass
class Step(Waveform):
    before_w: float
    after_w: float
    at_s: float

    def power(self, t: float) -> float:
        return self.before_w if t < self.at_s else self.after_w

    def energy(self, a: float, b: float) -> float:
        cut = min(max(self.at_s, a), b)
        return self.before_w * (cut - a) + self.after_w * (b - cut)


@dataclass
class Square(Waveform):
    low_w: float
    high_w: float
    period_s: float
    phase_s: float = 0.0  # high during the first half of each period after phase_s

    def power(self, t: float) -> float:
        x = (t - self.phase_s) % self.period_s
        return self.high_w if x < self.period_s / 2 else self.low_w

    def _cum(self, t: float) -> float:
        n, x = divmod(t - self.phase_s, self.period_s)
        half = self.period_s / 2
        per = (self.high_w + self.low_w) * half
        return n * per + self.high_w * min(x, half) + self.low_w * max(x - half, 0.0)

    def energy(self, a: float, b: float) -> float:
        return self._cum(b) - self._cum(a)


@dataclass
class Ramp(Waveform):
    start_w: float
    end_w: float
    t0: float
    t1: float

    def power(self, t: float) -> float:
        if t <= self.t0:
            return self.start_w
        if t >= self.t1:
            return self.end_w
        return self.start_w + (self.end_w - self.start_w) * (t - self.t0) / (self.t1 - self.t0)

    def energy(self, a: float, b: float) -> float:
        pts = sorted({a, b, min(max(self.t0, a), b), min(max(self.t1, a), b)})
        pairs = zip(pts, pts[1:], strict=False)
        return sum((self.power(x) + self.power(y)) / 2 * (y - x) for x, y in pairs)


# ---------------------------------------------------------------- devices
Num = float | Callable[[float], float]


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    architecture: int = _real.NVML_DEVICE_ARCH_HOPPER
    power: Waveform = field(default_factory=lambda: Constant(100.0))
    counter_supported: bool | None = None  # None: Volta and newer only, as NVML documents
    counter_update_s: float = 0.0  # the counter only advances every this many seconds
    counter_offset_mj: int = 987_654_321  # energy since "driver load" before the test
    instant_power: bool = True  # NVML_FI_DEV_POWER_INSTANT supported
    temperature_c: Num = 40.0
    throttle_mask: int | Callable[[float], int] = 0
    event_reasons_api: bool = True  # nvmlDeviceGetCurrentClocksEventReasons exists
    memory_total_bytes: int = 80 * 10**9
    memory_used_bytes: Num = 2 * 10**9
    bus_width_bits: int | None = 5120
    max_mem_clock_mhz: int = 2619
    utilization: tuple = (87, 41)
    migs: list[str] = field(default_factory=list)
    fail_after_calls: int | None = None
    fail_code: int = _real.NVML_ERROR_GPU_IS_LOST
    calls: int = 0
    power_limit_mw: int | None = 700_000  # None: not supported
    # nvmlDeviceGetPowerManagementDefaultLimit; None: the limit the GPU started with (the one
    # before the first change, else power_limit_mw)
    default_power_limit_mw: int | None = None
    control: FakeControl = field(default_factory=FakeControl)  # power limit range, clocks, locks
    # (pid, used bytes or None) of compute processes; None: listing them is not supported
    processes: list[tuple[int, int | None]] | None = field(default_factory=list)
    # NVML function name -> the calls to it that raise NVMLError_Unknown (1-based call numbers;
    # an empty set: every call fails). Counted per function.
    failing_calls: dict[str, set] = field(default_factory=dict)
    function_calls: dict[str, int] = field(default_factory=dict)

    @property
    def has_counter(self) -> bool:
        if self.counter_supported is not None:
            return self.counter_supported
        return self.architecture >= _real.NVML_DEVICE_ARCH_VOLTA


@dataclass(frozen=True)
class _Handle:
    index: int


@dataclass(frozen=True)
class _MigHandle:
    parent: int
    slot: int


def _value(v: Num, t: float) -> float:
    return v(t) if callable(v) else v


class FakeNvml(ControlFunctions, types.ModuleType):
    """``sys.modules["pynvml"]`` replacement over ``gpus``, reading time from ``clock.now()``."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        clock,
        init_error: int | None = None,
        call_latency_s: float = 0.0,
        main_thread_call_s: float = 0.0,
    ) -> None:
        super().__init__("pynvml")
        for name in dir(_real):
            if name.startswith(("NVML_", "NVMLError", "nvmlClocks")):
                setattr(self, name, getattr(_real, name))
        self.gpus = gpus
        self.clock = clock
        self.init_error = init_error
        self.call_latency_s = call_latency_s
        # Each device call made from the main thread moves ``clock`` on by this much (the sampler
        # thread's calls take no virtual time), so edge reads are seen to take time.
        self.main_thread_call_s = main_thread_call_s
        self.init_calls = 0
        self.shutdown_calls = 0
        if not all(g.event_reasons_api for g in gpus):
            # an older driver/binding without the function (llem looks it up with getattr)
            self.nvmlDeviceGetCurrentClocksEventReasons = None  # type: ignore[assignment]

    # -- library
    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise _real.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        if not 0 <= index < len(self.gpus):
            raise _real.NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    # -- helpers
    def _gpu(self, handle, function: str = "") -> FakeGpu:
        idx = handle.parent if isinstance(handle, _MigHandle) else handle.index
        gpu = self.gpus[idx]
        gpu.calls += 1
        if self.call_latency_s:
            time.sleep(self.call_latency_s)
        if self.main_thread_call_s and threading.current_thread() is threading.main_thread():
            self.clock.sleep(self.main_thread_call_s)
        if gpu.fail_after_calls is not None and gpu.calls > gpu.fail_after_calls:
            raise _real.NVMLError(gpu.fail_code)
        if function:
            n = gpu.function_calls[function] = gpu.function_calls.get(function, 0) + 1
            failing = gpu.failing_calls.get(function)
            if failing is not None and (not failing or n in failing):
                raise _real.NVMLError(_real.NVML_ERROR_UNKNOWN)
        return gpu

    def _t(self) -> float:
        return self.clock.now()

    # -- identity
    def nvmlDeviceGetUUID(self, handle) -> str:
        gpu = self._gpu(handle)
        return gpu.migs[handle.slot] if isinstance(handle, _MigHandle) else gpu.uuid

    def nvmlDeviceGetName(self, handle) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetMaxMigDeviceCount(self, handle) -> int:
        gpu = self._gpu(handle)
        if not gpu.migs:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index: int) -> _MigHandle:
        gpu = self._gpu(handle)
        if index >= len(gpu.migs):
            raise _real.NVMLError(_real.NVML_ERROR_NOT_FOUND)
        return _MigHandle(handle.index, index)

    # -- energy and power
    def nvmlDeviceGetTotalEnergyConsumption(self, handle) -> int:
        gpu = self._gpu(handle, "nvmlDeviceGetTotalEnergyConsumption")
        if not gpu.has_counter:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        t = self._t()
        if gpu.counter_update_s:
            t = math.floor(t / gpu.counter_update_s) * gpu.counter_update_s
        return gpu.counter_offset_mj + int(round(gpu.power.energy(0.0, t) * 1000))

    def nvmlDeviceGetPowerUsage(self, handle) -> int:
        """mW averaged over the last second, as on Ampere and newer."""
        gpu = self._gpu(handle, "nvmlDeviceGetPowerUsage")
        t = self._t()
        return int(round(gpu.power.energy(t - 1.0, t) * 1000))

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        gpu = self._gpu(handle, "nvmlDeviceGetFieldValues")
        out = []
        for fid in field_ids:
            ok = fid == _real.NVML_FI_DEV_POWER_INSTANT and gpu.instant_power
            mw = int(round(gpu.power.power(self._t()) * 1000)) if ok else 0
            out.append(
                types.SimpleNamespace(
                    fieldId=fid,
                    scopeId=0,
                    timestamp=0,
                    latencyUsec=0,
                    valueType=_real.NVML_VALUE_TYPE_UNSIGNED_INT,
                    nvmlReturn=_real.NVML_SUCCESS if ok else _real.NVML_ERROR_NOT_SUPPORTED,
                    value=types.SimpleNamespace(uiVal=mw),
                )
            )
        return out

    # -- the rest of a sample
    def nvmlDeviceGetTemperature(self, handle, sensor: int) -> int:
        return int(
            round(_value(self._gpu(handle, "nvmlDeviceGetTemperature").temperature_c, self._t()))
        )

    def nvmlDeviceGetClockInfo(self, handle, kind: int) -> int:
        return running_clock_mhz(self._gpu(handle, "nvmlDeviceGetClockInfo"), kind)

    def nvmlDeviceGetMaxClockInfo(self, handle, kind: int) -> int:
        gpu = self._gpu(handle)
        return gpu.max_mem_clock_mhz if kind == _real.NVML_CLOCK_MEM else 1980

    def nvmlDeviceGetMemoryBusWidth(self, handle) -> int:
        gpu = self._gpu(handle)
        if gpu.bus_width_bits is None:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return gpu.bus_width_bits

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu(handle, "nvmlDeviceGetMemoryInfo")
        used = int(_value(gpu.memory_used_bytes, self._t()))
        return types.SimpleNamespace(
            total=gpu.memory_total_bytes, used=used, free=gpu.memory_total_bytes - used
        )

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return types.SimpleNamespace(gpu=gpu.utilization[0], memory=gpu.utilization[1])

    def _mask(self, handle) -> int:
        gpu = self._gpu(handle, "clock_event_reasons")
        m = gpu.throttle_mask
        return m(self._t()) if callable(m) else m

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle) -> int:
        return self._mask(handle)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle) -> int:
        return self._mask(handle)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle) -> int:
        gpu = self._gpu(handle)
        if gpu.power_limit_mw is None:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return enforced_mw(gpu)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        if gpu.processes is None:
            raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in gpu.processes]


# Every NVML function the fake offers exists under the same name in the real bindings.
FAKED_FUNCTIONS = sorted({n for cls in FakeNvml.__mro__ for n in vars(cls) if n.startswith("nvml")})

"""A programmable stand-in for the ``amdsmi`` package (AMD SMI 7.x's Python API), for tests
without an AMD GPU. Hand it to ``llem.devices.amd.init_amdsmi(fake)``.

Its functions have amdsmi_interface.py's names, arguments and return shapes: dicts with amdsmi's
keys, "N/A" for what a part does not report, power caps in uW, power in W, the energy accumulator
in ticks of ``counter_resolution`` uJ, VRAM in MB (process memory in bytes). Errors are
``AmdSmiLibraryException(err_code)`` with amdsmi_status_t codes.

Each ``FakeAmdGpu`` carries planted truths: a power waveform over the session clock
(``llem.testing.fake_pynvml``'s waveforms), the accumulator integrating it at a planted resolution
and width (optionally placed to wrap at a planted instant, to go backwards, or to freeze), a part
with or without ``current_socket_power``, a power cap range and whether setting it is permitted,
clock ranges, processes and violation flags.
"""

from __future__ import annotations

import enum
import types
from dataclasses import dataclass, field
from typing import Any

from llem.testing.fake_pynvml import Constant, Waveform

AMDSMI_STATUS_INVAL = 1
AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_INIT_ERROR = 18
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34
NA = "N/A"


class AmdSmiException(Exception):
    """Base of amdsmi's errors."""


class AmdSmiLibraryException(AmdSmiException):
    _TEXT = {
        AMDSMI_STATUS_INVAL: "AMDSMI_STATUS_INVAL - Invalid parameters",
        AMDSMI_STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
        AMDSMI_STATUS_NO_PERM: "AMDSMI_STATUS_NO_PERM - Permission Denied",
        AMDSMI_STATUS_INIT_ERROR: "AMDSMI_STATUS_INIT_ERROR - Initialization error",
        AMDSMI_STATUS_DRIVER_NOT_LOADED: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
    }

    def __init__(self, err_code: int) -> None:
        super().__init__(err_code)
        self.err_code = abs(err_code)
        self.err_info = self._TEXT.get(self.err_code, "AMDSMI_STATUS_UNKNOWN_ERROR")

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"


class AmdSmiInitFlags(enum.IntEnum):
    INIT_AMD_GPUS = 2


class AmdSmiClkType(enum.IntEnum):
    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4


class AmdSmiTemperatureType(enum.IntEnum):
    EDGE = 0
    HOTSPOT = 1
    JUNCTION = 1
    VRAM = 2


class AmdSmiTemperatureMetric(enum.IntEnum):
    CURRENT = 0


class AmdSmiDevPerfLevel(enum.IntEnum):
    AUTO = 0
    MANUAL = 3


@dataclass
class FakeAmdGpu:
    uuid: str
    name: str = "AMD Instinct MI300X"
    power: Waveform = field(default_factory=lambda: Constant(300.0))
    resolution_uj: float = 15.259  # counter_resolution, uJ per tick
    counter_bits: int = 64  # the accumulator wraps at 2**counter_bits ticks
    counter_wraps_at_s: float | None = None  # place the accumulator to wrap at this instant
    counter_update_s: float = 0.0  # the accumulator only moves every this many seconds
    counter_backwards_at_s: float | None = None  # from then on it reads lower by:
    counter_backwards_ticks: int = 10**8
    counter_frozen_at_s: float | None = None  # from then on it stays where it was
    counter_fails_at_s: float | None = None  # from then on reading it raises (a lost GPU)
    energy_counter: bool = True
    current_socket_power: bool = True  # MI300-style instantaneous socket power
    temperature_c: float = 45.0
    vram_total_mb: int = 196_592
    vram_used_mb: int = 2_048
    vram_max_bandwidth_gbps: int | str = 5_300
    gfx_clk_mhz: int = 2100
    gfx_range_mhz: tuple[int, int] = (500, 2100)
    mem_clk_mhz: int = 1300
    mem_range_mhz: tuple[int, int] = (900, 1300)
    power_cap_uw: int = 750_000_000
    default_power_cap_uw: int = 750_000_000
    power_cap_range_uw: tuple[int, int] = (200_000_000, 750_000_000)
    set_permitted: bool = True  # False: every set raises AMDSMI_STATUS_NO_PERM
    violations: dict[str, Any] = field(default_factory=dict)  # violation_status keys
    processes: list[tuple[int, int]] | None = field(default_factory=list)  # (pid, vram bytes)
    perf_level: int = AmdSmiDevPerfLevel.AUTO
    calls: list[str] = field(default_factory=list)  # every call, by function name


@dataclass(frozen=True)
class FakeHandle:
    index: int


class FakeAmdSmi(types.ModuleType):
    """``amdsmi`` replacement over ``gpus``, reading time from ``clock.now()``."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiInitFlags = AmdSmiInitFlags
    AmdSmiClkType = AmdSmiClkType
    AmdSmiTemperatureType = AmdSmiTemperatureType
    AmdSmiTemperatureMetric = AmdSmiTemperatureMetric
    AmdSmiDevPerfLevel = AmdSmiDevPerfLevel

    def __init__(self, gpus: list[FakeAmdGpu], clock: Any, init_error: int | None = None) -> None:
        super().__init__("amdsmi")
        self.gpus, self.clock, self.init_error = gpus, clock, init_error
        self.init_calls = 0
        self.shutdown_calls = 0
        self._origin = {id(g): self._start_ticks(g) for g in gpus}

    # -- library
    def amdsmi_init(self, flag: Any = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise AmdSmiLibraryException(self.init_error)

    def amdsmi_shut_down(self) -> None:
        self.shutdown_calls += 1

    def amdsmi_get_processor_handles(self) -> list[FakeHandle]:
        return [FakeHandle(i) for i in range(len(self.gpus))]

    def _gpu(self, handle: FakeHandle, function: str) -> FakeAmdGpu:
        gpu = self.gpus[handle.index]
        gpu.calls.append(function)
        return gpu

    # -- identity
    def amdsmi_get_gpu_device_uuid(self, handle: FakeHandle) -> str:
        return self._gpu(handle, "amdsmi_get_gpu_device_uuid").uuid

    def amdsmi_get_gpu_asic_info(self, handle: FakeHandle) -> dict[str, Any]:
        gpu = self._gpu(handle, "amdsmi_get_gpu_asic_info")
        return {"market_name": gpu.name, "vendor_id": "0x1002", "vendor_name": "AMD"}

    def amdsmi_get_gpu_vram_info(self, handle: FakeHandle) -> dict[str, Any]:
        gpu = self._gpu(handle, "amdsmi_get_gpu_vram_info")
        return {
            "vram_type": 7,
            "vram_size": gpu.vram_total_mb,
            "vram_bit_width": 8192,
            "vram_max_bandwidth": gpu.vram_max_bandwidth_gbps,
        }

    def amdsmi_get_gpu_driver_info(self, handle: FakeHandle) -> dict[str, Any]:
        self._gpu(handle, "amdsmi_get_gpu_driver_info")
        return {"driver_name": "amdgpu", "driver_version": "6.10.5", "driver_date": "N/A"}

    # -- energy and power
    def _ticks_between(self, gpu: FakeAmdGpu, a: float, b: float) -> int:
        return int(round(gpu.power.energy(a, b) * 1e6 / gpu.resolution_uj))

    def _start_ticks(self, gpu: FakeAmdGpu) -> int:
        width = 2**gpu.counter_bits
        if gpu.counter_wraps_at_s is None:
            return 123_456_789
        return (width - self._ticks_between(gpu, 0.0, gpu.counter_wraps_at_s)) % width

    def accumulator(self, gpu: FakeAmdGpu, t: float) -> int:
        """The raw accumulator at ``t`` (the planted counter, including its faults)."""
        if gpu.counter_update_s:
            t = (t // gpu.counter_update_s) * gpu.counter_update_s
        if gpu.counter_frozen_at_s is not None:
            t = min(t, gpu.counter_frozen_at_s)
        ticks = self._origin[id(gpu)] + self._ticks_between(gpu, 0.0, t)
        if gpu.counter_backwards_at_s is not None and t >= gpu.counter_backwards_at_s:
            ticks -= gpu.counter_backwards_ticks
        return ticks % 2**gpu.counter_bits

    def amdsmi_get_energy_count(self, handle: FakeHandle) -> dict[str, Any]:
        gpu = self._gpu(handle, "amdsmi_get_energy_count")
        if not gpu.energy_counter:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        t = self.clock.now()
        if gpu.counter_fails_at_s is not None and t >= gpu.counter_fails_at_s:
            raise AmdSmiLibraryException(AMDSMI_STATUS_DRIVER_NOT_LOADED)
        return {
            "energy_accumulator": self.accumulator(gpu, t),
            "counter_resolution": gpu.resolution_uj,
            "timestamp": int(t * 1e9),
        }

    def amdsmi_get_power_info(self, handle: FakeHandle) -> dict[str, Any]:
        """W, as amdsmi reports them: the instantaneous power where the part has it, the mean
        of the last second as average_socket_power where it has not."""
        gpu = self._gpu(handle, "amdsmi_get_power_info")
        t = self.clock.now()
        now_w = int(round(gpu.power.power(t)))
        avg_w = int(round(gpu.power.energy(t - 1.0, t)))
        return {
            "socket_power": now_w if gpu.current_socket_power else avg_w,
            "current_socket_power": now_w if gpu.current_socket_power else NA,
            "average_socket_power": NA if gpu.current_socket_power else avg_w,
            "gfx_voltage": NA,
            "soc_voltage": NA,
            "mem_voltage": NA,
            "power_limit": gpu.power_cap_uw // 1_000_000,
        }

    # -- the rest of a sample
    def amdsmi_get_temp_metric(self, handle: FakeHandle, kind: Any, metric: Any) -> int:
        gpu = self._gpu(handle, "amdsmi_get_temp_metric")
        if kind == AmdSmiTemperatureType.EDGE:  # MI300 reports no edge temperature
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        return int(gpu.temperature_c)

    def amdsmi_get_clock_info(self, handle: FakeHandle, clk_type: Any) -> dict[str, Any]:
        gpu = self._gpu(handle, "amdsmi_get_clock_info")
        mem = clk_type == AmdSmiClkType.MEM
        lo, hi = gpu.mem_range_mhz if mem else gpu.gfx_range_mhz
        clk = gpu.mem_clk_mhz if mem else gpu.gfx_clk_mhz
        return {"clk": clk, "min_clk": lo, "max_clk": hi, "clk_locked": NA, "clk_deep_sleep": 0}

    def amdsmi_get_gpu_vram_usage(self, handle: FakeHandle) -> dict[str, Any]:
        gpu = self._gpu(handle, "amdsmi_get_gpu_vram_usage")
        return {"vram_total": gpu.vram_total_mb, "vram_used": gpu.vram_used_mb}

    def amdsmi_get_gpu_activity(self, handle: FakeHandle) -> dict[str, Any]:
        self._gpu(handle, "amdsmi_get_gpu_activity")
        return {"gfx_activity": 93, "umc_activity": 41, "mm_activity": NA}

    def amdsmi_get_violation_status(self, handle: FakeHandle) -> dict[str, Any]:
        gpu = self._gpu(handle, "amdsmi_get_violation_status")
        keys = ("active_prochot_thrm", "active_ppt_pwr", "active_socket_thrm")
        out: dict[str, Any] = dict.fromkeys(keys + ("active_vr_thrm", "active_hbm_thrm"), False)
        out.update(gpu.violations)
        return out

    def amdsmi_get_gpu_process_list(self, handle: FakeHandle) -> list[dict[str, Any]]:
        gpu = self._gpu(handle, "amdsmi_get_gpu_process_list")
        if gpu.processes is None:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
        return [
            {
                "name": "python3",
                "pid": pid,
                "mem": vram,
                "engine_usage": {"gfx": 0, "enc": 0},
                "memory_usage": {"gtt_mem": 0, "cpu_mem": 0, "vram_mem": vram},
                "cu_occupancy": NA,
            }
            for pid, vram in gpu.processes
        ]

    # -- control
    def amdsmi_get_power_cap_info(self, handle: FakeHandle) -> dict[str, Any]:
        gpu = self._gpu(handle, "amdsmi_get_power_cap_info")
        lo, hi = gpu.power_cap_range_uw
        return {
            "power_cap": gpu.power_cap_uw,
            "default_power_cap": gpu.default_power_cap_uw,
            "dpm_cap": 2100,
            "min_power_cap": lo,
            "max_power_cap": hi,
        }

    def _may_set(self, gpu: FakeAmdGpu) -> None:
        if not gpu.set_permitted:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NO_PERM)

    def amdsmi_set_power_cap(self, handle: FakeHandle, sensor_ind: int, cap: int) -> None:
        gpu = self._gpu(handle, "amdsmi_set_power_cap")
        if not isinstance(sensor_ind, int) or not isinstance(cap, int):
            raise AmdSmiException("sensor_ind and cap must be int")
        self._may_set(gpu)
        lo, hi = gpu.power_cap_range_uw
        if not lo <= cap <= hi:
            raise AmdSmiLibraryException(AMDSMI_STATUS_INVAL)
        gpu.power_cap_uw = cap

    def amdsmi_set_gpu_clk_range(
        self, handle: FakeHandle, min_clk: int, max_clk: int, clk_type: Any
    ) -> None:
        gpu = self._gpu(handle, "amdsmi_set_gpu_clk_range")
        self._may_set(gpu)
        if clk_type == AmdSmiClkType.MEM:
            gpu.mem_clk_mhz = min(max(gpu.mem_clk_mhz, min_clk), max_clk)
        else:
            gpu.gfx_clk_mhz = min(max(gpu.gfx_clk_mhz, min_clk), max_clk)
        gpu.perf_level = AmdSmiDevPerfLevel.MANUAL

    def amdsmi_set_gpu_perf_level(self, handle: FakeHandle, level: Any) -> None:
        gpu = self._gpu(handle, "amdsmi_set_gpu_perf_level")
        self._may_set(gpu)
        gpu.perf_level = int(level)

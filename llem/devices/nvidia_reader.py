"""One NVIDIA GPU's readings for a window: NVML's energy counter, power and the rest of a sample.

The ``GpuReader`` of ``llem.devices.gpu`` for NVIDIA, asked through the ``Nvml`` library of
``llem.devices.nvidia`` (whose ``module`` is pynvml or a test double).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from llem.devices.gpu import SensorSpec, error_text
from llem.devices.readings import MB, Sample, SecondaryReadings
from llem.vocabulary.processes import OtherProcess

log = logging.getLogger(__name__)

# NVML's counter counts whole mJ and is refreshed about every 100 ms. NVIDIA documents +/- 5 W for
# nvidia-smi's power.draw (`nvidia-smi --help-query-gpu`: "accurate to within +/- 5 watts") and
# +/- 5 % of the draw for nvmlDeviceGetPowerUsage (NVML API reference, Fermi and Kepler); llem takes
# the larger on every GPU. nvmlDeviceGetPowerUsage is a mean over the last 1 s on Ampere and newer.
COUNTER_RESOLUTION_J = 0.001
COUNTER_UPDATE_S = 0.1
SENSOR_RELATIVE = 0.05
SENSOR_ABSOLUTE_W = 5.0
POWER_AVERAGE_S = 1.0
SENSOR_SOURCE = "NVML API reference +/- 5 %, nvidia-smi +/- 5 W"

# nvmlDeviceGetCurrentClocksEventReasons (and its older name ...ThrottleReasons) returns a bitmask
# of why the clocks are below their maximum; the bits as in nvml.h (nvmlClocksEventReason*), each
# named by its reason of ``llem.devices.readings.THROTTLE_REASONS``.
REASON_BITS = {
    "gpu_idle": 0x001,
    "applications_clocks_setting": 0x002,
    "sw_power_cap": 0x004,
    "hw_slowdown": 0x008,
    "sync_boost": 0x010,
    "sw_thermal_slowdown": 0x020,
    "hw_thermal_slowdown": 0x040,
    "hw_power_brake_slowdown": 0x080,
    "display_clock_setting": 0x100,
}


def decode_reasons(mask: int | None) -> list[str]:
    """Names of the bits set in ``mask``, in bit order; unknown bits as ``unknown_0x...``."""
    if not mask:
        return []
    names = [name for name, bit in REASON_BITS.items() if mask & bit]
    rest = mask & ~sum(REASON_BITS.values())
    return names + [f"unknown_{1 << i:#x}" for i in range(rest.bit_length()) if rest >> i & 1]


def _field_value(fv: Any) -> float:
    """The number inside an ``nvmlFieldValue_t`` according to its ``valueType``."""
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return float(getattr(fv.value, attr.get(int(fv.valueType), "uiVal")))


def nvml_sensor(power_averaging_s: float) -> SensorSpec:
    """NVML's counter step and refresh and its sensor's accuracy; ``power_averaging_s`` is the
    length of the moving average behind the power read (1 s or 0)."""
    return SensorSpec(
        COUNTER_RESOLUTION_J,
        COUNTER_UPDATE_S,
        SENSOR_RELATIVE,
        SENSOR_ABSOLUTE_W,
        power_averaging_s,
        SENSOR_SOURCE,
        "nvmlDeviceGetPowerUsage",
    )


class NvmlLike(Protocol):
    """What a reader needs of ``llem.devices.nvidia.Nvml``."""

    module: Any

    def is_error(self, exc: BaseException) -> bool: ...

    def is_not_supported(self, exc: BaseException) -> bool: ...


class NvmlDevice:
    """One physical GPU: probes what it supports once, then reads counters and samples.

    Power is read from ``nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)`` (instantaneous) when
    supported, else from ``nvmlDeviceGetPowerUsage`` (a ~1 s moving average on Ampere and newer).
    The energy counter is ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since driver load, Volta+).
    Any other query the device does not support reads as None from then on.

    Only the energy figure's own reading is primary: the counter, or power on a GPU without one.
    Any other reading (temperature, clocks, throttle reasons, memory, utilisation, power beside a
    counter) failing with an NVML error reads as None in that sample, with the error kept in
    ``Sample.errors``; it never voids the energy.
    """

    def __init__(self, nvml: NvmlLike, handle: Any, uuid: str) -> None:
        self._lib, self.nvml, self.handle, self.uuid = nvml, nvml.module, handle, uuid
        pynvml = self.nvml
        self._secondary = SecondaryReadings(nvml.is_not_supported, nvml.is_error, error_text)
        self.has_counter = self._probe(lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        self.power_api: str | None = None
        if self._instant_power_works():
            self.power_api = "instant"
        elif self._probe(lambda: pynvml.nvmlDeviceGetPowerUsage(handle)):
            self.power_api = "average"
        self._throttle_fn = self._pick_throttle_fn()
        self._processes_fn = self._pick_processes_fn()

    def sensor(self) -> SensorSpec:
        """NVML's figures, with the 1 s moving average behind ``nvmlDeviceGetPowerUsage`` where
        that is what is read (0 where the instantaneous field is)."""
        return nvml_sensor(POWER_AVERAGE_S if self.power_api == "average" else 0.0)

    def _probe(self, fn: Callable[[], Any]) -> bool:
        try:
            fn()
            return True
        except Exception as exc:
            if self._lib.is_not_supported(exc):
                return False
            raise

    def _instant_power_works(self) -> bool:
        """Instantaneous power is an optional field: any NVML error just means 'use average'."""
        try:
            self._instant_power_w()
            return True
        except Exception as exc:
            if self._lib.is_error(exc) or isinstance(exc, AttributeError):
                return False
            raise

    def _pick_throttle_fn(self) -> Callable[[Any], int] | None:
        for kind in ("Event", "Throttle"):  # the newer name first, then the older one
            fn = getattr(self.nvml, f"nvmlDeviceGetCurrentClocks{kind}Reasons", None)
            if fn is not None and self._probe(functools.partial(fn, self.handle)):
                picked: Callable[[Any], int] = fn
                return picked
        return None

    def _pick_processes_fn(self) -> Callable[[Any], Any] | None:
        fn = getattr(self.nvml, "nvmlDeviceGetComputeRunningProcesses", None)
        if fn is None:
            return None
        try:
            fn(self.handle)
            listed: Callable[[Any], Any] = fn
            return listed
        except Exception as exc:
            if self._lib.is_error(exc):
                return None  # not supported here (or not permitted): not checked
            raise

    def _instant_power_w(self) -> float:
        n = self.nvml
        fv = n.nvmlDeviceGetFieldValues(self.handle, [n.NVML_FI_DEV_POWER_INSTANT])[0]
        if int(fv.nvmlReturn) != n.NVML_SUCCESS:
            raise n.NVMLError(int(fv.nvmlReturn))
        return _field_value(fv) / 1000.0

    def read_counter_j(self) -> float:
        """Energy counter in joules (since driver load). Raises NVMLError."""
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) / 1000.0

    def read_power_w(self) -> float | None:
        if self.power_api == "instant":
            return self._instant_power_w()
        if self.power_api == "average":
            return float(self.nvml.nvmlDeviceGetPowerUsage(self.handle)) / 1000.0
        return None

    def read_sample(self, now: float) -> Sample:
        """Everything the sampler records for this device. Raises NVMLError only when the
        primary reading fails (power on a device without an energy counter)."""
        n, h = self.nvml, self.handle
        errors: list[tuple[str, str]] = []

        def read(key: str, fn: Callable[[], Any], *columns: str) -> Any:
            return self._secondary.read(key, fn, errors, *columns)

        if not self.has_counter:  # energy is integrated from power: a power failure voids it
            power = self.read_power_w()
        else:
            power = read("power", self.read_power_w, "power_w")
        mem = read("memory", lambda: n.nvmlDeviceGetMemoryInfo(h), "memory_used_mb")
        util = read(
            "util", lambda: n.nvmlDeviceGetUtilizationRates(h), "gpu_util_pct", "mem_util_pct"
        )
        fn = self._throttle_fn
        throttle = None if fn is None else read("throttle", lambda: int(fn(h)), "throttle_reasons")
        temp = read("temp", self._temperature, "temperature_c")
        sm = read(
            "sm_clock", lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)), "sm_clock_mhz"
        )
        mem_clock = read(
            "mem_clock",
            lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            "mem_clock_mhz",
        )
        return Sample(
            time_s=now,
            device=self.uuid,
            power_w=power,
            temperature_c=temp,
            sm_clock_mhz=sm,
            mem_clock_mhz=mem_clock,
            throttle_reasons=None if throttle is None else tuple(decode_reasons(throttle)),
            memory_used_mb=None if mem is None else mem.used / MB,
            gpu_util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
            errors=tuple(errors),
        )

    def _temperature(self) -> float:
        n = self.nvml
        return float(n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU))

    def read_temperature_c(self) -> float | None:
        temp: float | None = self._secondary.read("temp", self._temperature, [], "temperature_c")
        return temp

    def other_processes(self, is_own: Callable[[int], bool]) -> list[OtherProcess] | None:
        """Compute processes on this GPU for which ``is_own(pid)`` is false (llem and its
        descendants are its own); None when NVML cannot list them."""
        if self._processes_fn is None:
            return None
        try:
            procs = self._processes_fn(self.handle)
        except Exception as exc:
            if self._lib.is_error(exc):
                log.warning("%s: cannot list compute processes: %s", self.uuid, error_text(exc))
                return None
            raise
        others = [p for p in procs if not is_own(int(p.pid))]
        return [OtherProcess(self.uuid, int(p.pid), _used_mb(p)) for p in others]


def _used_mb(process: Any) -> float | None:
    """A process's GPU memory in MB; NVML reports NVML_VALUE_NOT_AVAILABLE (a huge number) or None
    when it cannot see it."""
    used = getattr(process, "usedGpuMemory", None)
    return None if used is None or used >= 2**63 else used / MB

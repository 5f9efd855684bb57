"""NVML access: loading the library, error text, and reading one GPU.

``pynvml`` (the nvidia-ml-py package) is imported inside functions only, so importing llem never
touches NVML. NVML units are converted here, once: milliwatts to watts, millijoules to joules,
bytes to MB (2**20 bytes, the unit of torch's memory figures in result.json).

NVML enumerates *all* GPUs in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``; mapping torch's
device indices onto NVML devices is the job of ``llem.measure.devices``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Dict, List, Optional, Set

from llem.measure.sampler import Sample

log = logging.getLogger(__name__)

MB = float(2**20)


class NvmlUnavailable(Exception):
    """NVML cannot be used; ``str(exc)`` is the reason, e.g. ``NVMLError_LibraryNotFound: ...``."""


class SourceError(Exception):
    """A power source failed while measuring; ``str(exc)`` is the reason."""


def error_text(exc: BaseException) -> str:
    """``NVMLError_GpuIsLost: GPU is lost`` style text for an exception."""
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text and text != name else name


def init_nvml() -> Any:
    """Import ``pynvml`` and call ``nvmlInit()``. Returns the module; raises ``NvmlUnavailable``."""
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py missing
        raise NvmlUnavailable(f"pynvml is not importable ({exc})") from exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        raise NvmlUnavailable(error_text(exc)) from exc
    return pynvml


def shutdown_nvml(pynvml: Any) -> None:
    """``nvmlShutdown()``, logging instead of raising (it is called from cleanup paths)."""
    try:
        pynvml.nvmlShutdown()
    except Exception as exc:
        log.debug("nvmlShutdown failed: %s", error_text(exc))


def is_nvml_error(pynvml: Any, exc: BaseException) -> bool:
    return isinstance(exc, pynvml.NVMLError)


def is_not_supported(pynvml: Any, exc: BaseException) -> bool:
    """True for NVML's 'this device/driver cannot do that' errors (not for real failures)."""
    if isinstance(exc, AttributeError):  # an older nvidia-ml-py without the function
        return True
    codes = {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND}
    return is_nvml_error(pynvml, exc) and getattr(exc, "value", None) in codes


def as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _field_value(fv: Any) -> float:
    """The number inside an ``nvmlFieldValue_t`` according to its ``valueType``."""
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return float(getattr(fv.value, attr.get(int(fv.valueType), "uiVal")))


class NvmlDevice:
    """One physical GPU: probes what it supports once, then reads counters and samples.

    Power is read from ``nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)`` (instantaneous) when
    supported, else from ``nvmlDeviceGetPowerUsage`` (a ~1 s moving average on Ampere and newer).
    The energy counter is ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since driver load, Volta+).
    Any other query the device does not support reads as None from then on.
    """

    def __init__(self, pynvml: Any, handle: Any, uuid: str) -> None:
        self.nvml = pynvml
        self.handle = handle
        self.uuid = uuid
        self._unsupported: Set[str] = set()
        self.has_counter = self._probe(lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        self.power_api: Optional[str] = None
        if self._instant_power_works():
            self.power_api = "instant"
        elif self._probe(lambda: pynvml.nvmlDeviceGetPowerUsage(handle)):
            self.power_api = "average"
        self._throttle_fn = self._pick_throttle_fn()

    def _probe(self, fn: Callable[[], Any]) -> bool:
        try:
            fn()
            return True
        except Exception as exc:
            if is_not_supported(self.nvml, exc):
                return False
            raise

    def _instant_power_works(self) -> bool:
        """Instantaneous power is an optional field: any NVML error just means 'use average'."""
        try:
            self._instant_power_w()
            return True
        except Exception as exc:
            if is_nvml_error(self.nvml, exc) or isinstance(exc, AttributeError):
                return False
            raise

    def _pick_throttle_fn(self) -> Optional[Callable[[Any], int]]:
        for name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            fn = getattr(self.nvml, name, None)
            if fn is not None and self._probe(functools.partial(fn, self.handle)):
                return fn
        return None

    def _instant_power_w(self) -> float:
        fv = self.nvml.nvmlDeviceGetFieldValues(self.handle, [self.nvml.NVML_FI_DEV_POWER_INSTANT])[
            0
        ]
        if int(fv.nvmlReturn) != self.nvml.NVML_SUCCESS:
            raise self.nvml.NVMLError(int(fv.nvmlReturn))
        return _field_value(fv) / 1000.0

    def read_counter_j(self) -> float:
        """Energy counter in joules (since driver load). Raises NVMLError."""
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0

    def read_power_w(self) -> Optional[float]:
        if self.power_api == "instant":
            return self._instant_power_w()
        if self.power_api == "average":
            return self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        return None

    def _optional(self, key: str, fn: Callable[[], Any]) -> Any:
        if key in self._unsupported:
            return None
        try:
            return fn()
        except Exception as exc:
            if is_not_supported(self.nvml, exc):
                self._unsupported.add(key)
                return None
            raise

    def read_sample(self, now: float) -> Sample:
        """Everything the sampler records for this device. Raises NVMLError on real failures."""
        n, h = self.nvml, self.handle
        mem = self._optional("memory", lambda: n.nvmlDeviceGetMemoryInfo(h))
        util = self._optional("util", lambda: n.nvmlDeviceGetUtilizationRates(h))
        throttle_fn = self._throttle_fn
        throttle = (
            None if throttle_fn is None else self._optional("throttle", lambda: int(throttle_fn(h)))
        )
        return Sample(
            time_s=now,
            device=self.uuid,
            power_w=self.read_power_w(),
            temperature_c=self._optional(
                "temp", lambda: float(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU))
            ),
            sm_clock_mhz=self._optional(
                "sm_clock", lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM))
            ),
            mem_clock_mhz=self._optional(
                "mem_clock", lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM))
            ),
            throttle_mask=throttle,
            memory_used_mb=None if mem is None else mem.used / MB,
            gpu_util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
        )

    def read_temperature_c(self) -> Optional[float]:
        return self._optional(
            "temp",
            lambda: float(
                self.nvml.nvmlDeviceGetTemperature(self.handle, self.nvml.NVML_TEMPERATURE_GPU)
            ),
        )


class NvmlSource:
    """Power source over a set of NVML devices (see ``llem.measure.energy.PowerSource``)."""

    def __init__(self, pynvml: Any, devices: List[NvmlDevice]) -> None:
        self.nvml = pynvml
        self.nvml_devices = devices
        self.uuids = [d.uuid for d in devices]
        self._by_uuid = {d.uuid: d for d in devices}

    def method(self, uuid: str) -> Optional[str]:
        """How this device's energy is measured: nvml_counter, nvml_power, or None (cannot)."""
        dev = self._by_uuid[uuid]
        if dev.has_counter:
            return "nvml_counter"
        return "nvml_power" if dev.power_api else None

    def setup_warnings(self) -> List[str]:
        out = []
        for d in self.nvml_devices:
            if not d.has_counter and d.power_api == "average":
                out.append(
                    f"{d.uuid}: no energy counter and no instantaneous power; energy is integrated "
                    "from nvmlDeviceGetPowerUsage, a ~1 s moving average that lags the real draw"
                )
        return out

    def _guard(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            if is_nvml_error(self.nvml, exc):
                raise SourceError(error_text(exc)) from exc
            raise

    def read_counters_j(self, now: float) -> Dict[str, float]:
        """Cumulative energy in J for devices with a counter. Raises SourceError."""
        return self._guard(
            lambda: {d.uuid: d.read_counter_j() for d in self.nvml_devices if d.has_counter}
        )

    def read_samples(self, now: float) -> List[Sample]:
        """One sample per device at ``now``. Raises SourceError."""
        return self._guard(lambda: [d.read_sample(now) for d in self.nvml_devices])

    def read_temperatures_c(self, now: float) -> Dict[str, Optional[float]]:
        return self._guard(lambda: {d.uuid: d.read_temperature_c() for d in self.nvml_devices})

    def window_warnings(self, start: float, end: float) -> List[str]:
        return []

    def close(self) -> None:
        shutdown_nvml(self.nvml)

"""NVML access: loading the library, error text, and reading one GPU.

This is the only module that imports ``pynvml`` (the nvidia-ml-py package) and calls ``nvmlInit``;
the environment snapshot and pre-flight ask it (``system_snapshot``, ``persistence_mode_off``), and
the measurement code gets the initialised module from ``init_nvml``. The import happens inside
functions only, so importing llem never touches NVML. NVML units are converted here, once:
milliwatts to watts, millijoules to joules, bytes to MB (2**20 bytes, the unit of torch's memory
figures in result.json).

NVML enumerates *all* GPUs in PCI bus order and ignores ``CUDA_VISIBLE_DEVICES``; mapping torch's
device indices onto NVML devices is the job of ``llem.measure.devices``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llem.measure.sampler import Clock, Sample

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


@dataclass(frozen=True)
class OtherProcess:
    """A compute process other than this one on a measured GPU (memory in MB, None if hidden)."""

    device: str
    pid: int
    used_memory_mb: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "pid": self.pid, "used_memory_mb": self.used_memory_mb}


def shutdown_nvml(pynvml: Any) -> None:
    """``nvmlShutdown()``, logging instead of raising (it is called from cleanup paths)."""
    try:
        pynvml.nvmlShutdown()
    except Exception as exc:
        log.debug("nvmlShutdown failed: %s", error_text(exc))


def system_snapshot() -> dict[str, Any]:
    """Driver version and every GPU NVML sees, for ``environment.json``.

    Returns ``{"driver_version", "gpus": [{index, name, uuid, memory_total_mb}], "unavailable":
    {key: reason}}``; raises ``NvmlUnavailable`` when NVML cannot start.
    """
    pynvml = init_nvml()
    unavailable: dict[str, str] = {}
    try:
        driver: str | None = None
        try:
            driver = as_str(pynvml.nvmlSystemGetDriverVersion())
        except Exception as exc:
            unavailable["driver_version"] = f"NVML: {type(exc).__name__}: {exc}"
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            gpu: dict[str, Any] = {"index": index, "name": None, "uuid": None}
            gpu["memory_total_mb"] = None
            try:
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                gpu["name"] = as_str(pynvml.nvmlDeviceGetName(handle))
                gpu["uuid"] = as_str(pynvml.nvmlDeviceGetUUID(handle))
                gpu["memory_total_mb"] = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // 2**20
            except Exception as exc:
                unavailable[f"gpus.{index}"] = f"NVML: {type(exc).__name__}: {exc}"
            gpus.append(gpu)
        return {"driver_version": driver, "gpus": gpus, "unavailable": unavailable}
    finally:
        shutdown_nvml(pynvml)


def persistence_mode_off() -> list[int]:
    """NVML indices of GPUs with persistence mode off; empty when NVML is missing or cannot say."""
    try:
        pynvml = init_nvml()
    except NvmlUnavailable:
        return []
    try:
        off = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            if pynvml.nvmlDeviceGetPersistenceMode(pynvml.nvmlDeviceGetHandleByIndex(i)) == 0:
                off.append(i)
        return off
    except Exception:  # unsupported: nothing to warn about
        return []
    finally:
        shutdown_nvml(pynvml)


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

    Only the energy figure's own reading is primary: the counter, or power on a GPU without one.
    Every other reading (temperature, clocks, throttle reasons, memory, utilisation, and power
    when a counter exists) that fails with an NVML error reads as None in that sample, with the
    error kept in ``Sample.errors``; it never voids the energy.
    """

    def __init__(self, pynvml: Any, handle: Any, uuid: str) -> None:
        self.nvml = pynvml
        self.handle = handle
        self.uuid = uuid
        self._unsupported: set[str] = set()
        self.has_counter = self._probe(lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        self.power_api: str | None = None
        if self._instant_power_works():
            self.power_api = "instant"
        elif self._probe(lambda: pynvml.nvmlDeviceGetPowerUsage(handle)):
            self.power_api = "average"
        self._throttle_fn = self._pick_throttle_fn()
        self._processes_fn = self._pick_processes_fn()

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

    def _pick_throttle_fn(self) -> Callable[[Any], int] | None:
        for name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            fn = getattr(self.nvml, name, None)
            if fn is not None and self._probe(functools.partial(fn, self.handle)):
                return fn
        return None

    def _pick_processes_fn(self) -> Callable[[Any], Any] | None:
        fn = getattr(self.nvml, "nvmlDeviceGetComputeRunningProcesses", None)
        if fn is None:
            return None
        try:
            fn(self.handle)
            return fn
        except Exception as exc:
            if is_nvml_error(self.nvml, exc):
                return None  # not supported here (or not permitted): not checked
            raise

    def _instant_power_w(self) -> float:
        fv = self.nvml.nvmlDeviceGetFieldValues(self.handle, [self.nvml.NVML_FI_DEV_POWER_INSTANT])[
            0
        ]
        if int(fv.nvmlReturn) != self.nvml.NVML_SUCCESS:
            raise self.nvml.NVMLError(int(fv.nvmlReturn))
        return _field_value(fv) / 1000.0

    @property
    def power_is_primary(self) -> bool:
        """True when energy is integrated from power (no counter): a power failure voids it."""
        return not self.has_counter

    def read_counter_j(self) -> float:
        """Energy counter in joules (since driver load). Raises NVMLError."""
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0

    def read_power_w(self) -> float | None:
        if self.power_api == "instant":
            return self._instant_power_w()
        if self.power_api == "average":
            return self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
        return None

    def _reading(
        self,
        key: str,
        fn: Callable[[], Any],
        errors: list[tuple[str, str]],
        columns: tuple[str, ...],
    ) -> Any:
        """A secondary reading: None when unsupported (from then on) or when NVML fails now."""
        if key in self._unsupported:
            return None
        try:
            return fn()
        except Exception as exc:
            if is_not_supported(self.nvml, exc):
                self._unsupported.add(key)
                return None
            if not is_nvml_error(self.nvml, exc):
                raise
            errors.extend((c, error_text(exc)) for c in columns)
            return None

    def read_sample(self, now: float) -> Sample:
        """Everything the sampler records for this device. Raises NVMLError only when the
        primary reading fails (power on a device without an energy counter)."""
        n, h = self.nvml, self.handle
        errors: list[tuple[str, str]] = []
        if self.power_is_primary:
            power = self.read_power_w()
        else:
            power = self._reading("power", self.read_power_w, errors, ("power_w",))
        mem = self._reading(
            "memory", lambda: n.nvmlDeviceGetMemoryInfo(h), errors, ("memory_used_mb",)
        )
        util = self._reading(
            "util",
            lambda: n.nvmlDeviceGetUtilizationRates(h),
            errors,
            ("gpu_util_pct", "mem_util_pct"),
        )
        throttle_fn = self._throttle_fn
        throttle = (
            None
            if throttle_fn is None
            else self._reading(
                "throttle", lambda: int(throttle_fn(h)), errors, ("throttle_reasons",)
            )
        )
        temp = self._reading("temp", self._temperature, errors, ("temperature_c",))
        sm = self._reading(
            "sm_clock",
            lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            errors,
            ("sm_clock_mhz",),
        )
        mem_clock = self._reading(
            "mem_clock",
            lambda: float(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            errors,
            ("mem_clock_mhz",),
        )
        return Sample(
            time_s=now,
            device=self.uuid,
            power_w=power,
            temperature_c=temp,
            sm_clock_mhz=sm,
            mem_clock_mhz=mem_clock,
            throttle_mask=throttle,
            memory_used_mb=None if mem is None else mem.used / MB,
            gpu_util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
            errors=tuple(errors),
        )

    def _temperature(self) -> float:
        return float(
            self.nvml.nvmlDeviceGetTemperature(self.handle, self.nvml.NVML_TEMPERATURE_GPU)
        )

    def read_temperature_c(self) -> float | None:
        return self._reading("temp", self._temperature, [], ("temperature_c",))

    def other_processes(self, own_pid: int) -> list[OtherProcess] | None:
        """Compute processes on this GPU other than ``own_pid``; None when NVML cannot list them."""
        if self._processes_fn is None:
            return None
        try:
            procs = self._processes_fn(self.handle)
        except Exception as exc:
            if is_nvml_error(self.nvml, exc):
                log.warning("%s: cannot list compute processes: %s", self.uuid, error_text(exc))
                return None
            raise
        out = []
        for p in procs:
            if int(p.pid) == own_pid:
                continue
            used = getattr(p, "usedGpuMemory", None)
            # NVML reports NVML_VALUE_NOT_AVAILABLE (a huge number) or None when it cannot see it
            mb = None if used is None or used >= 2**63 else used / MB
            out.append(OtherProcess(self.uuid, int(p.pid), mb))
        return out


class NvmlSource:
    """Power source over a set of NVML devices (see ``llem.measure.energy.PowerSource``)."""

    kind = "nvml"

    def __init__(self, pynvml: Any, devices: list[NvmlDevice]) -> None:
        self.nvml = pynvml
        self.nvml_devices = devices
        self.uuids = [d.uuid for d in devices]
        self._by_uuid = {d.uuid: d for d in devices}

    def method(self, uuid: str) -> str | None:
        """How this device's energy is measured: nvml_counter, nvml_power, or None (cannot)."""
        dev = self._by_uuid[uuid]
        if dev.has_counter:
            return "nvml_counter"
        return "nvml_power" if dev.power_api else None

    def setup_warnings(self) -> list[str]:
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

    def read_counters_j(self, clock: Clock) -> tuple[float, dict[str, float]]:
        """(instant, cumulative J per device with a counter). The instant is the midpoint of the
        reads: NVML does not say when within the call it sampled. Raises SourceError."""
        before = clock.now()
        values = self._guard(
            lambda: {d.uuid: d.read_counter_j() for d in self.nvml_devices if d.has_counter}
        )
        return (before + clock.now()) / 2, values

    def read_samples(self, now: float) -> list[Sample]:
        """One sample per device at ``now``. Raises SourceError when a primary reading fails."""
        return self._guard(lambda: [d.read_sample(now) for d in self.nvml_devices])

    def read_temperatures_c(self, now: float) -> dict[str, float | None]:
        return self._guard(lambda: {d.uuid: d.read_temperature_c() for d in self.nvml_devices})

    def other_processes(self) -> list[OtherProcess] | None:
        """Other compute processes on the measured GPUs; None when no GPU can list them."""
        lists = [d.other_processes(os.getpid()) for d in self.nvml_devices]
        if all(x is None for x in lists):
            return None
        return [p for x in lists if x is not None for p in x]

    def window_warnings(self, start: float, end: float) -> list[str]:
        return []

    def close(self) -> None:
        shutdown_nvml(self.nvml)

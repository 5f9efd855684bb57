"""NVML: the only module that imports it (``pynvml``, imported inside functions only).

``init_nvml()`` returns an ``Nvml``: the initialised library, asked through typed methods (GPUs,
names, MIG instances, ``NvmlDevice`` readers); other modules ask through it and never see
``pynvml`` itself (what a GPU is, its memory, bandwidth and power limits, is read through it in
``llem.measure.gpu_facts``). ``system_snapshot`` and ``persistence_mode_off`` serve the environment
snapshot and pre-flight. NVML units are converted where they are read, once: mW to W, mJ to J,
bytes to MB (2**20 bytes, the unit of torch's memory figures in result.json).

NVML numbers *all* GPUs in PCI bus order, ignoring ``CUDA_VISIBLE_DEVICES`` (see
``llem.measure.devices`` for how torch's device indices map onto NVML's).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llem.measure.energy import OtherProcess
from llem.measure.sampler import Sample

log = logging.getLogger(__name__)

MB = float(2**20)


class NvmlUnavailable(Exception):
    """NVML cannot be used; ``str(exc)`` is the reason, e.g. ``NVMLError_LibraryNotFound: ...``."""


def error_text(exc: BaseException) -> str:
    """``NVMLError_GpuIsLost: GPU is lost`` style text for an exception."""
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text and text != name else name


def as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Gpu:
    """A physical GPU as NVML numbers it (PCI bus order); ``handle`` is NVML's, opaque elsewhere."""

    index: int
    handle: Any
    uuid: str


class Nvml:
    """The initialised NVML library (see ``init_nvml``), asked through typed methods."""

    def __init__(self, module: Any) -> None:
        self.module = module  # pynvml, or a test double in its place

    def shutdown(self) -> None:
        """``nvmlShutdown()``, logging instead of raising (it is called from cleanup paths)."""
        try:
            self.module.nvmlShutdown()
        except Exception as exc:
            log.debug("nvmlShutdown failed: %s", error_text(exc))

    def is_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self.module.NVMLError)

    def is_not_supported(self, exc: BaseException) -> bool:
        """True for NVML's 'this device/driver cannot do that' errors (not for real failures)."""
        if isinstance(exc, AttributeError):  # an older nvidia-ml-py without the function
            return True
        n = self.module
        codes = {n.NVML_ERROR_NOT_SUPPORTED, n.NVML_ERROR_FUNCTION_NOT_FOUND}
        return self.is_error(exc) and getattr(exc, "value", None) in codes

    def gpus(self) -> list[Gpu]:
        """Every GPU NVML sees, in its order."""
        n, out = self.module, []
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            out.append(Gpu(i, h, as_str(n.nvmlDeviceGetUUID(h))))
        return out

    def name(self, gpu: Gpu) -> str:
        return as_str(self.module.nvmlDeviceGetName(gpu.handle))

    def mig_uuids(self, gpu: Gpu) -> list[str]:
        """The UUIDs of ``gpu``'s MIG instances; empty when it has none or cannot say."""
        n = self.module
        try:
            count = n.nvmlDeviceGetMaxMigDeviceCount(gpu.handle)
        except Exception as exc:
            if self.is_not_supported(exc) or self.is_error(exc):
                return []
            raise
        uuids = []
        for j in range(count):
            try:
                mig = n.nvmlDeviceGetMigDeviceHandleByIndex(gpu.handle, j)
                uuids.append(as_str(n.nvmlDeviceGetUUID(mig)))
            except n.NVMLError:
                continue  # empty slot
        return uuids

    def device(self, gpu: Gpu) -> NvmlDevice:
        """A reader of ``gpu``'s energy, power and the rest of a sample."""
        return NvmlDevice(self, gpu.handle, gpu.uuid)


def init_nvml() -> Nvml:
    """Import ``pynvml`` and call ``nvmlInit()``. Raises ``NvmlUnavailable``."""
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py missing
        raise NvmlUnavailable(f"pynvml is not importable ({exc})") from exc
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        raise NvmlUnavailable(error_text(exc)) from exc
    return Nvml(pynvml)


def system_snapshot() -> dict[str, Any]:
    """Driver version and every GPU NVML sees, for ``environment.json``.

    Returns ``{"driver_version", "gpus": [{index, name, uuid, memory_total_mb}], "unavailable":
    {key: reason}}``; raises ``NvmlUnavailable`` when NVML cannot start.
    """
    nvml = init_nvml()
    n, unavailable = nvml.module, {}
    try:
        driver: str | None = None
        try:
            driver = as_str(n.nvmlSystemGetDriverVersion())
        except Exception as exc:
            unavailable["driver_version"] = f"NVML: {type(exc).__name__}: {exc}"
        gpus = []
        for index in range(n.nvmlDeviceGetCount()):
            gpu: dict[str, Any] = dict(index=index, name=None, uuid=None, memory_total_mb=None)
            try:
                handle = n.nvmlDeviceGetHandleByIndex(index)
                gpu["name"] = as_str(n.nvmlDeviceGetName(handle))
                gpu["uuid"] = as_str(n.nvmlDeviceGetUUID(handle))
                gpu["memory_total_mb"] = int(n.nvmlDeviceGetMemoryInfo(handle).total) // 2**20
            except Exception as exc:
                unavailable[f"gpus.{index}"] = f"NVML: {type(exc).__name__}: {exc}"
            gpus.append(gpu)
        return {"driver_version": driver, "gpus": gpus, "unavailable": unavailable}
    finally:
        nvml.shutdown()


def persistence_mode_off() -> list[int]:
    """NVML indices of GPUs with persistence mode off; empty when NVML is missing or cannot say."""
    try:
        nvml = init_nvml()
    except NvmlUnavailable:
        return []
    n = nvml.module
    try:
        handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
        return [i for i, h in enumerate(handles) if n.nvmlDeviceGetPersistenceMode(h) == 0]
    except Exception:  # unsupported: nothing to warn about
        return []
    finally:
        nvml.shutdown()


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
    Any other reading (temperature, clocks, throttle reasons, memory, utilisation, power beside a
    counter) failing with an NVML error reads as None in that sample, with the error kept in
    ``Sample.errors``; it never voids the energy.
    """

    def __init__(self, nvml: Nvml, handle: Any, uuid: str) -> None:
        self._lib, self.nvml, self.handle, self.uuid = nvml, nvml.module, handle, uuid
        pynvml = self.nvml
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
            if self._lib.is_not_supported(exc):
                self._unsupported.add(key)
                return None
            if not self._lib.is_error(exc):
                raise
            errors.extend((c, error_text(exc)) for c in columns)
            return None

    def read_sample(self, now: float) -> Sample:
        """Everything the sampler records for this device. Raises NVMLError only when the
        primary reading fails (power on a device without an energy counter)."""
        n, h = self.nvml, self.handle
        errors: list[tuple[str, str]] = []

        def read(key: str, fn: Callable[[], Any], *columns: str) -> Any:
            return self._reading(key, fn, errors, columns)

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
            throttle_mask=throttle,
            memory_used_mb=None if mem is None else mem.used / MB,
            gpu_util_pct=None if util is None else float(util.gpu),
            mem_util_pct=None if util is None else float(util.memory),
            errors=tuple(errors),
        )

    def _temperature(self) -> float:
        n = self.nvml
        return float(n.nvmlDeviceGetTemperature(self.handle, n.NVML_TEMPERATURE_GPU))

    def read_temperature_c(self) -> float | None:
        return self._reading("temp", self._temperature, [], ("temperature_c",))

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

"""NVIDIA GPUs through NVML: the only module that imports ``pynvml`` (inside ``init_nvml`` only).

``init_nvml()`` returns an ``Nvml``, the ``GpuLibrary`` of ``llem.devices.gpu`` for NVIDIA: the
GPUs, what each is (``facts``), a reader of each (``llem.devices.nvidia_reader``), the environment
snapshot, and the control primitives (``llem.devices.nvidia_control``). NVML units are converted
where they are read, once: mW to W, mJ to J, bytes to MB (2**20 bytes).

NVML numbers *all* GPUs in PCI bus order, ignoring ``CUDA_VISIBLE_DEVICES``; ``Nvml.visible``
parses that variable the way CUDA does: integers are indices, ``GPU-<uuid>`` (a unique prefix is
enough) and ``MIG-<uuid>`` select by UUID, parsing stops at the first invalid entry, and a repeated
entry makes no device visible. Integer indices follow CUDA's order, which is NVML's (PCI) order only
with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (``Nvml.order_warning`` says so when the GPUs differ).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from llem.devices.gpu import (
    Gpu,
    GpuFacts,
    GpuUnavailable,
    Inventory,
    Visible,
    error_text,
    visibility_shown,
)
from llem.devices.nvidia_control import NvmlControl
from llem.devices.nvidia_reader import NvmlDevice
from llem.devices.readings import MB

log = logging.getLogger(__name__)


class NvmlUnavailable(GpuUnavailable):
    """NVML cannot be used; ``str(exc)`` is the reason, e.g. ``NVMLError_LibraryNotFound: ...``."""


def as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Nvml(NvmlControl):
    """The initialised NVML library (see ``init_nvml``), asked through typed methods."""

    vendor = "nvidia"
    api = "NVML"
    visible_devices_var = "CUDA_VISIBLE_DEVICES"
    torch_device_type = "cuda"

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

    def partition_uuids(self, gpu: Gpu) -> list[str]:
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

    def reader(self, gpu: Gpu) -> NvmlDevice:
        """A reader of ``gpu``'s energy, power and the rest of a sample."""
        return NvmlDevice(self, gpu.handle, gpu.uuid)

    def visible(self, inv: Inventory, env: Mapping[str, str]) -> tuple[Visible, str]:
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        return cuda_visible(inv, cvd), visibility_shown("CUDA_VISIBLE_DEVICES", cvd)

    def order_warning(self, inv: Inventory, env: Mapping[str, str]) -> str | None:
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        by_int = cvd is None or any(re.fullmatch(r"\s*\d+\s*", e) for e in cvd.split(","))
        names = {self.name(g) for g in inv.gpus}
        if by_int and len(names) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
            return (
                "GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA may "
                "number them differently from NVML; set CUDA_DEVICE_ORDER=PCI_BUS_ID so that the "
                "measured GPU is the one torch used"
            )
        return None

    # ------------------------------------------------------------------ what a GPU is
    def facts(self, gpu: Gpu) -> GpuFacts:
        """Name, total memory, memory bandwidth and power limits of one physical GPU."""
        n, h, reasons = self.module, gpu.handle, {}
        total_mb: float | None = None
        try:
            total_mb = n.nvmlDeviceGetMemoryInfo(h).total / MB
        except Exception as exc:
            if not self.is_not_supported(exc):
                raise
            reasons["memory_total_mb"] = f"NVML cannot report total memory ({error_text(exc)})"
        bandwidth, why = self.memory_bandwidth(gpu)
        if why:
            reasons["memory_bandwidth_bytes_per_s"] = why
        limit_w = self._watts(h, "nvmlDeviceGetEnforcedPowerLimit", "power_limit_w", reasons)
        default_w = self._watts(
            h, "nvmlDeviceGetPowerManagementDefaultLimit", "default_power_limit_w", reasons
        )
        return GpuFacts(self.name(gpu), total_mb, bandwidth, limit_w, reasons, default_w)

    def memory_bandwidth(self, gpu: Gpu) -> tuple[float | None, str | None]:
        """Peak memory bandwidth in bytes/s = bus width (bits) / 8 * max memory clock (Hz) * 2."""
        n, h = self.module, gpu.handle
        try:
            bus_bits = n.nvmlDeviceGetMemoryBusWidth(h)
            mem_mhz = n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)
        except Exception as exc:
            if self.is_not_supported(exc) or self.is_error(exc):
                return None, f"NVML cannot report memory bus width or clock ({error_text(exc)})"
            raise
        if not bus_bits or not mem_mhz:
            why = f"NVML reported bus width {bus_bits} bits and max memory clock {mem_mhz} MHz"
            return None, why
        return bus_bits / 8 * mem_mhz * 1e6 * 2, None

    def _watts(self, handle: Any, function: str, key: str, reasons: dict[str, str]) -> float | None:
        """``pynvml.<function>(handle)`` in W; None with its reason under ``reasons[key]``."""
        try:
            return float(getattr(self.module, function)(handle)) / 1000.0
        except Exception as exc:
            if not (self.is_not_supported(exc) or self.is_error(exc)):
                raise
            what = key.removesuffix("_w").replace("_", " ")
            reasons[key] = f"NVML cannot report the {what} ({error_text(exc)})"
            return None

    # ------------------------------------------------------------------ the machine
    def snapshot(self) -> dict[str, Any]:
        """Driver version and every GPU NVML sees, for ``environment.json``."""
        n, unavailable = self.module, {}
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

    def persistence_off(self) -> list[int]:
        """NVML indices of GPUs with persistence mode off; empty when NVML cannot say."""
        n = self.module
        try:
            handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
            return [i for i, h in enumerate(handles) if n.nvmlDeviceGetPersistenceMode(h) == 0]
        except Exception:  # unsupported: nothing to warn about
            return []


_LEGACY_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/\d+/\d+$")


def cuda_visible(inv: Inventory, cvd: str | None) -> Visible:
    """The devices CUDA makes visible under ``CUDA_VISIBLE_DEVICES=cvd``, in CUDA's order."""
    if cvd is None:
        return [(g, None) for g in inv.gpus]
    visible: Visible = []
    seen: list[str] = []
    for raw in cvd.split(","):
        entry = raw.strip()
        if entry in seen:
            return []  # CUDA: a repeated entry makes no device visible
        seen.append(entry)
        found: tuple[Gpu | None, str | None] = (None, None)
        if re.fullmatch(r"\d+", entry):
            i = int(entry)
            found = (inv.gpus[i], None) if i < len(inv.gpus) else (None, None)
        elif _LEGACY_MIG.match(entry):
            gpu, _ = inv.by_uuid(_LEGACY_MIG.match(entry).group(1), prefix=True)  # type: ignore[union-attr]
            found = (gpu, entry)
        elif entry.upper().startswith(("GPU-", "MIG-")):
            found = inv.by_uuid(entry, prefix=True)
        if found[0] is None:
            break  # CUDA stops at the first invalid entry
        visible.append((found[0], found[1]))
    return visible


def _import_pynvml() -> Any:
    try:
        import pynvml
    except ImportError as exc:  # nvidia-ml-py missing
        raise NvmlUnavailable(f"pynvml is not importable ({exc})") from exc
    return pynvml


def init_nvml(module: Any = None) -> Nvml:
    """Import ``pynvml`` (or take ``module``, a test double of it) and call ``nvmlInit()``.
    Raises ``NvmlUnavailable``."""
    pynvml = module if module is not None else _import_pynvml()
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        raise NvmlUnavailable(error_text(exc)) from exc
    return Nvml(pynvml)

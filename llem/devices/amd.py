"""AMD GPUs through amdsmi: the only module that imports ``amdsmi`` (inside ``init_amdsmi`` only).

``init_amdsmi()`` returns an ``AmdSmi``, the ``GpuLibrary`` of ``llem.devices.gpu`` for AMD: the
GPUs, what each is (``facts``), a reader of each (``llem.devices.amd_reader``), the environment
snapshot, and the control primitives (``llem.devices.amd_control``). Units are converted where they
are read, once: uW to W, uJ to J (times the counter's own resolution), MB stay MB.

Numbering: a GPU's ``index`` is its position in ``amdsmi_get_processor_handles()``, which lists
every AMD GPU of the machine whatever ``ROCR_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` say. HIP
numbers only the devices those variables leave visible, in the order they list them, so HIP device
0 is amdsmi GPU 2 under ``HIP_VISIBLE_DEVICES=2``; with both variables unset the two orders are
assumed to agree (``amdsmi_get_gpu_enumeration_info``'s ``hip_id`` says HIP's number where the
driver reports it; ``llem.measure.devices`` maps torch's devices by UUID first). ``AmdSmi.visible``
follows ROCm's "GPU isolation" documentation: ``ROCR_VISIBLE_DEVICES`` first (indices into amdsmi's
list, or ``GPU-<uuid>``), then ``HIP_VISIBLE_DEVICES`` (indices into what ROCR left; HIP reads
``CUDA_VISIBLE_DEVICES`` when it is unset). A UUID amdsmi does not list ends the list there, like
an index out of range.

amdsmi is not thread-safe before ROCm 7.2: every call goes through ``AmdSmi.call``, which holds one
lock (re-entrant: a reader's counter bookkeeping holds it around its reads too).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from llem.devices.amd_control import AmdSmiControl
from llem.devices.amd_reader import AmdSmiDevice, na
from llem.devices.gpu import (
    Gpu,
    GpuFacts,
    GpuUnavailable,
    Inventory,
    LibraryMissing,
    Visible,
    error_text,
    visibility_shown,
)

log = logging.getLogger(__name__)

# amdsmi_status_t values (amdsmi_wrapper.py): what ``AmdSmiLibraryException.err_code`` holds
STATUS_NOT_SUPPORTED = 2
STATUS_NOT_YET_IMPLEMENTED = 3


class AmdSmiUnavailable(GpuUnavailable):
    """amdsmi is installed but cannot be used; ``str(exc)`` is the reason."""


class AmdSmi(AmdSmiControl):
    """The initialised amdsmi library (see ``init_amdsmi``), asked through typed methods."""

    vendor = "amd"
    api = "amdsmi"
    visible_devices_var = "HIP_VISIBLE_DEVICES"
    torch_device_type = "cuda"

    def __init__(self, module: Any) -> None:
        self.module = module  # amdsmi, or a test double in its place
        self.lock = threading.RLock()
        self._handles: list[Any] | None = None

    def call(self, fn: str, *args: Any) -> Any:
        """``amdsmi.<fn>(*args)`` under the library's lock."""
        with self.lock:
            return getattr(self.module, fn)(*args)

    def shutdown(self) -> None:
        """``amdsmi_shut_down()``, logging instead of raising (called from cleanup paths)."""
        try:
            self.call("amdsmi_shut_down")
        except Exception as exc:
            log.debug("amdsmi_shut_down failed: %s", error_text(exc))

    def is_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self.module.AmdSmiException)

    def status(self, exc: BaseException) -> int | None:
        code = getattr(exc, "err_code", None)
        return code if isinstance(code, int) else None

    def is_not_supported(self, exc: BaseException) -> bool:
        """True for amdsmi's 'this part/driver cannot do that' errors (not for real failures)."""
        if isinstance(exc, AttributeError):  # an older amdsmi without the function
            return True
        codes = {STATUS_NOT_SUPPORTED, STATUS_NOT_YET_IMPLEMENTED}
        return self.is_error(exc) and self.status(exc) in codes

    def handles(self) -> list[Any]:
        if self._handles is None:
            self._handles = list(self.call("amdsmi_get_processor_handles"))
        return self._handles

    def gpus(self) -> list[Gpu]:
        """Every GPU amdsmi sees, in its order (see the module docstring)."""
        return [
            Gpu(i, h, str(self.call("amdsmi_get_gpu_device_uuid", h)))
            for i, h in enumerate(self.handles())
        ]

    def name(self, gpu: Gpu) -> str:
        return str(self.call("amdsmi_get_gpu_asic_info", gpu.handle)["market_name"])

    def partition_uuids(self, gpu: Gpu) -> list[str]:
        """Empty: amdsmi lists each compute partition as a processor of its own."""
        return []

    def reader(self, gpu: Gpu) -> AmdSmiDevice:
        return AmdSmiDevice(self, gpu.handle, gpu.uuid)

    def visible(self, inv: Inventory, env: Mapping[str, str]) -> tuple[Visible, str]:
        rocr = env.get("ROCR_VISIBLE_DEVICES")
        hip_var = "HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in env else "CUDA_VISIBLE_DEVICES"
        hip = env.get(hip_var)
        kept = _select(inv, _select(inv, inv.gpus, rocr, by_uuid=True), hip, by_uuid=False)
        said = [
            visibility_shown(v, x) for v, x in (("ROCR_VISIBLE_DEVICES", rocr), (hip_var, hip)) if x
        ]
        return [(g, None) for g in kept], ", ".join(said) or visibility_shown(
            "HIP_VISIBLE_DEVICES", None
        )

    def order_warning(self, inv: Inventory, env: Mapping[str, str]) -> str | None:
        return None

    # ------------------------------------------------------------------ what a GPU is
    def _optional(self, key: str, reasons: dict[str, str], fn: Callable[[], Any]) -> Any:
        try:
            value = na(fn())
        except Exception as exc:
            if not self.is_error(exc):
                raise
            reasons[key] = f"amdsmi cannot report it ({error_text(exc)})"
            return None
        if value is None:
            reasons[key] = "amdsmi reports N/A on this GPU"
        return value

    def facts(self, gpu: Gpu) -> GpuFacts:
        """Name, total memory (MB), peak memory bandwidth and power caps of one GPU."""
        h, reasons = gpu.handle, dict[str, str]()
        vram = self._optional(
            "memory_total_mb", reasons, lambda: self.call("amdsmi_get_gpu_vram_info", h)
        )
        total = None if vram is None else na(vram.get("vram_size"))
        gbps = None if vram is None else na(vram.get("vram_max_bandwidth"))
        if vram is not None and total is None:
            reasons["memory_total_mb"] = "amdsmi reports vram_size N/A"
        if vram is None or not gbps:
            reasons["memory_bandwidth_bytes_per_s"] = "amdsmi reports no vram_max_bandwidth"
        caps = self._optional(
            "power_limit_w", reasons, lambda: self.call("amdsmi_get_power_cap_info", h)
        )
        limit = None if caps is None else _watts(caps.get("power_cap"))
        default = None if caps is None else _watts(caps.get("default_power_cap"))
        if caps is None:
            reasons["default_power_limit_w"] = reasons["power_limit_w"]
        return GpuFacts(
            self.name(gpu),
            None if total is None else float(total),
            float(gbps) * 1e9 if gbps else None,  # vram_max_bandwidth is in GB/s
            limit,
            reasons,
            default,
        )

    # ------------------------------------------------------------------ the machine
    def snapshot(self) -> dict[str, Any]:
        """Driver version and every GPU amdsmi sees, for ``environment.json``."""
        unavailable: dict[str, str] = {}
        driver: str | None = None
        gpus = []
        for gpu in self._snapshot_gpus(unavailable):
            entry: dict[str, Any] = dict(
                index=gpu.index, name=None, uuid=gpu.uuid, memory_total_mb=None
            )
            try:
                entry["name"] = self.name(gpu)
                vram = self.call("amdsmi_get_gpu_vram_info", gpu.handle)
                entry["memory_total_mb"] = na(vram.get("vram_size"))
                if driver is None:
                    info = self.call("amdsmi_get_gpu_driver_info", gpu.handle)
                    driver = na(info.get("driver_version"))
            except Exception as exc:
                if not self.is_error(exc):
                    raise
                unavailable[f"gpus.{gpu.index}"] = f"amdsmi: {error_text(exc)}"
            gpus.append(entry)
        if driver is None:
            unavailable.setdefault("driver_version", "amdsmi reports no driver version")
        return {"driver_version": driver, "gpus": gpus, "unavailable": unavailable}

    def _snapshot_gpus(self, unavailable: dict[str, str]) -> list[Gpu]:
        try:
            return self.gpus()
        except Exception as exc:
            if not self.is_error(exc):
                raise
            unavailable["gpus"] = f"amdsmi: {error_text(exc)}"
            return []

    def persistence_off(self) -> list[int]:
        """Empty: amdgpu keeps no NVIDIA-style persistence mode to warn about."""
        return []


def _select(inv: Inventory, pool: list[Gpu], value: str | None, by_uuid: bool) -> list[Gpu]:
    """The GPUs of ``pool`` a ROCm visibility variable keeps, in its order; the list ends at
    the first entry that names no GPU of ``pool`` (or repeats one)."""
    if value is None:
        return list(pool)
    kept: list[Gpu] = []
    for raw in value.split(","):
        entry = raw.strip()
        gpu: Gpu | None = None
        if re.fullmatch(r"\d+", entry):
            gpu = pool[int(entry)] if int(entry) < len(pool) else None
        elif by_uuid and entry.upper().startswith("GPU-"):
            gpu, _ = inv.by_uuid(entry, prefix=True)
            gpu = gpu if gpu in pool else None
        if gpu is None or gpu in kept:
            break
        kept.append(gpu)
    return kept


def _watts(microwatts: Any) -> float | None:
    value = na(microwatts)
    return None if value is None else float(value) / 1e6


def _import_amdsmi() -> Any:
    try:
        import amdsmi  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:  # the amdsmi package (ROCm) is not installed
        raise LibraryMissing(f"amdsmi is not importable ({exc})") from exc
    return amdsmi


def init_amdsmi(module: Any = None) -> AmdSmi:
    """Import ``amdsmi`` (or take ``module``, a test double of it) and call ``amdsmi_init()``
    for AMD GPUs. Raises ``LibraryMissing`` (not installed) or ``AmdSmiUnavailable``."""
    amdsmi = module if module is not None else _import_amdsmi()
    try:
        amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
    except Exception as exc:  # driver not loaded, no GPU, ...
        raise AmdSmiUnavailable(f"amdsmi_init failed: {error_text(exc)}") from exc
    lib = AmdSmi(amdsmi)
    try:
        found = lib.handles()
    except Exception as exc:
        lib.shutdown()
        if not lib.is_error(exc):
            raise
        raise AmdSmiUnavailable(f"amdsmi lists no GPU: {error_text(exc)}") from exc
    if not found:
        lib.shutdown()
        raise AmdSmiUnavailable("amdsmi sees no AMD GPU")
    return lib

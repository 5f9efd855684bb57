"""Opening the power source that ``measurement.energy`` names, and the cheap pre-flight checks.

``auto``: the first vendor library that works (NVML, then amdsmi) when the run is on a GPU,
otherwise energy is unavailable with the reason (not an error). ``nvml``/``amdsmi``: that library
or a pre-flight error. ``replay``: the trace in
``measurement.replay_trace``. ``none``: nothing is measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llem.config.schema import MeasurementConfig
from llem.devices.gpu import GpuLibrary, GpuOpener, GpuUnavailable, Inventory, error_text, on_gpu
from llem.devices.gpus import open_gpus
from llem.errors import PreflightError
from llem.measure import devices as _devices
from llem.measure.devices import DeviceInfo, DeviceMappingError
from llem.measure.gpu_source import GpuSource
from llem.measure.power_source import PowerSource
from llem.measure.replay import ReplaySource, TraceError, load_trace

DISABLED = "disabled by measurement.energy=none"
#: why a run with measurement.energy=none has no GPU readings (temperature, clocks, memory)
READINGS_OFF = "measurement.energy=none turns GPU sampling off"


def energy_mode(cfg: MeasurementConfig) -> str:
    """``cfg.energy`` as a plain string."""
    return cfg.energy.value


@dataclass
class OpenedSource:
    """A power source (or None with ``unavailable_reason``), its devices and setup warnings.

    ``unavailable_reason`` says why there is no energy; ``no_gpu_reason`` why there are no GPU
    readings at all (temperature, clocks, device memory), in words that name no energy, e.g.
    ``NVML unavailable: NVMLError_LibraryNotFound``; None when a source is open.
    ``gpus_absent`` says, for a run that uses no GPU, that no vendor library starts on this host
    (so it has no GPU they can see, and a node's total holds none); None otherwise.
    """

    source: PowerSource | None = None
    devices: list[DeviceInfo] = field(default_factory=list)
    unavailable_reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    no_gpu_reason: str | None = None
    gpus_absent: str | None = None


#: the modes that name a vendor library, and how that library calls itself (``GpuLibrary.api``)
EXPLICIT = {"nvml": "NVML", "amdsmi": "amdsmi"}


def _no_nvml(exc: Exception, mode: str = "nvml") -> str:
    return f"measurement.energy={mode} but {EXPLICIT[mode]} is not available ({exc})"


def _not_cuda(device_type: str, mode: str = "nvml") -> str:
    return f"measurement.energy={mode} needs a CUDA device but the run is on device={device_type}"


_NON_NEGATIVE = (
    "idle_baseline_s",
    "cooldown_s",
    "min_window_s",
    "cooldown_temp_margin_c",
    "idle_max_age_s",
    "idle_temp_margin_c",
    "min_valid_window_s",
    "max_temp_rise_c",
    "idle_power_min_w",
)


def source_problems(
    cfg: MeasurementConfig,
    device_type: str,
    torch_indices: Sequence[int] | None,
    env: Mapping[str, str],
    opener: GpuOpener = open_gpus,
) -> list[str]:
    """One sentence per problem, naming the key and its value; empty when all is well."""
    mode = energy_mode(cfg)
    problems = _range_problems(cfg) + _replay_problems(cfg, mode)
    if mode in EXPLICIT and not on_gpu(device_type):
        problems.append(_not_cuda(device_type, mode))
    elif cfg.gpu_indices is not None and not on_gpu(device_type) and mode != "replay":
        problems.append(
            f"measurement.gpu_indices={list(cfg.gpu_indices)} names GPUs to measure, but this "
            f"run is on device={device_type}, where no GPU is measured; leave it unset"
        )
    elif (mode in EXPLICIT or mode == "auto") and on_gpu(device_type):
        problems.extend(_nvml_problems(cfg, mode, torch_indices, env, opener))
    return problems


def _vendor_problem(lib: GpuLibrary, mode: str) -> str | None:
    """Why ``lib`` is not the library ``measurement.energy=mode`` asks for (None: it is)."""
    wanted = EXPLICIT.get(mode)
    if wanted is None or lib.api == wanted:
        return None
    return (
        f"measurement.energy={mode} asks for {wanted}, but this machine's GPUs are read "
        f"through {lib.api} ({lib.vendor})"
    )


def _range_problems(cfg: MeasurementConfig) -> list[str]:
    problems: list[str] = []
    if not cfg.sample_hz or cfg.sample_hz <= 0 or cfg.sample_hz > 1000:
        problems.append(f"measurement.sample_hz={cfg.sample_hz}: must be > 0 and <= 1000")
    for key in _NON_NEGATIVE:
        value = getattr(cfg, key)
        if value is not None and value < 0:
            problems.append(f"measurement.{key}={value}: must be >= 0")
    if not 0 <= cfg.min_sample_coverage <= 1:
        problems.append(
            f"measurement.min_sample_coverage={cfg.min_sample_coverage}: must be between 0 and 1"
        )
    if cfg.idle_power_max_fraction <= 0:
        problems.append(
            f"measurement.idle_power_max_fraction={cfg.idle_power_max_fraction}: must be > 0"
        )
    return problems


def _replay_problems(cfg: MeasurementConfig, mode: str) -> list[str]:
    trace = cfg.replay_trace
    if trace and mode != "replay":
        return [
            f"measurement.replay_trace={trace} is set but measurement.energy={mode}; "
            "set measurement.energy=replay to use it"
        ]
    if mode != "replay":
        return []
    if not trace:
        return [
            "measurement.energy=replay needs measurement.replay_trace "
            "(a CSV with columns time_s, device, power_w)"
        ]
    try:
        load_trace(trace)
    except TraceError as exc:
        return [f"measurement.replay_trace={trace}: {exc}"]
    return []


def _nvml_problems(
    cfg: MeasurementConfig,
    mode: str,
    torch_indices: Sequence[int] | None,
    env: Mapping[str, str],
    opener: GpuOpener,
) -> list[str]:
    try:
        lib = opener()
    except GpuUnavailable as exc:
        return [_no_nvml(exc, mode)] if mode in EXPLICIT else []
    vendor_problem = _vendor_problem(lib, mode)
    if vendor_problem:
        lib.shutdown()
        return [vendor_problem]
    try:
        visible, shown = lib.visible(Inventory(lib), env)
        bad = [i for i in (torch_indices or []) if not 0 <= i < len(visible)]
        if bad:
            key = "measurement.gpu_indices" if cfg.gpu_indices is not None else "torch devices"
            return [
                f"{key}={list(torch_indices or [])}: only {len(visible)} GPU(s) are visible "
                f"({shown})"
            ]
        if not visible and mode in EXPLICIT:
            return [f"measurement.energy={mode} but no GPU is visible ({shown})"]
    except Exception as exc:
        if mode in EXPLICIT:
            return [
                f"measurement.energy={mode} but {lib.api} device queries fail ({error_text(exc)})"
            ]
    finally:
        lib.shutdown()
    return []


def open_source(
    cfg: MeasurementConfig,
    device_type: str,
    torch_indices: Sequence[int] | None,
    env: Mapping[str, str],
    origin_s: float,
    opener: GpuOpener = open_gpus,
) -> OpenedSource:
    """Open the source ``cfg.energy`` asks for. Raises ``PreflightError`` when an explicit
    ``nvml``/``replay`` request cannot be met."""
    mode = energy_mode(cfg)
    if mode == "none":
        return OpenedSource(unavailable_reason=DISABLED, no_gpu_reason=READINGS_OFF)
    if mode == "replay":
        return _open_replay(str(cfg.replay_trace), origin_s)
    if not on_gpu(device_type):
        if mode in EXPLICIT:
            raise PreflightError([_not_cuda(device_type, mode)])
        return off_gpu(device_type, opener)
    return _open_nvml(mode, torch_indices, env, opener)


def short_nvml_error(exc: BaseException) -> str:
    """``NVMLError_LibraryNotFound`` for NVML's own errors (their text repeats the name), the
    whole text otherwise (``pynvml is not importable (...)``)."""
    text = str(exc)
    head = text.split(":", 1)[0]
    return head if head.startswith("NVMLError") else text


def off_gpu(device_type: str, opener: GpuOpener) -> OpenedSource:
    """A run that is not on a GPU: no energy source. Says whether this machine has a GPU at all
    (``no NVIDIA GPU/NVML (NVMLError_LibraryNotFound)``: no vendor library starts, or one starts
    and lists no GPU, so no GPU is visible, ``gpus_absent``) or the run just is not on its GPU."""
    try:
        lib = opener()
    except GpuUnavailable as exc:
        short = short_nvml_error(exc)
        return OpenedSource(
            unavailable_reason=f"no NVIDIA GPU/NVML ({short})",
            no_gpu_reason=f"NVML unavailable: {short}",
            gpus_absent=f"no GPU is visible to NVML or amdsmi ({short})",
        )
    try:
        count: int | None = len(lib.gpus())
    except Exception as exc:
        if not lib.is_error(exc):
            raise
        count = None  # the library's own error: whether a GPU is there is not known
    finally:
        lib.shutdown()
    if count == 0:  # the library starts (a driver without a GPU): no GPU is visible either
        return OpenedSource(
            unavailable_reason=f"no GPU: {lib.api} lists none",
            no_gpu_reason=f"{lib.api} lists no GPU",
            gpus_absent=f"no GPU is visible to {lib.api} (it lists none)",
        )
    return OpenedSource(
        unavailable_reason=f"the run is on device={device_type}, not on a GPU",
        no_gpu_reason=f"the run is on device={device_type}",
    )


def _open_replay(path: str, origin_s: float) -> OpenedSource:
    try:
        traces = load_trace(path)
    except TraceError as exc:
        raise PreflightError([f"measurement.replay_trace={path}: {exc}"]) from exc
    why = "replayed device (no hardware behind it)"
    keys = (
        "torch_index",
        "vendor",
        "vendor_index",
        "memory_total_mb",
        "memory_bandwidth_bytes_per_s",
        "power_limit_w",
        "default_power_limit_w",
    )
    devices = [
        DeviceInfo(
            None, None, d, f"replay:{Path(path).name}", null_reasons=dict.fromkeys(keys, why)
        )
        for d in traces
    ]
    return OpenedSource(ReplaySource(traces, origin_s, path), devices)


def _open_nvml(
    mode: str, torch_indices: Sequence[int] | None, env: Mapping[str, str], opener: GpuOpener
) -> OpenedSource:
    try:
        lib = opener()
    except GpuUnavailable as exc:
        if mode in EXPLICIT:
            raise PreflightError([_no_nvml(exc, mode)]) from exc
        short = short_nvml_error(exc)
        return OpenedSource(
            unavailable_reason=f"NVML is not available ({short})",
            no_gpu_reason=f"NVML unavailable: {short}",
        )
    vendor_problem = _vendor_problem(lib, mode)
    if vendor_problem:
        lib.shutdown()
        raise PreflightError([vendor_problem])
    try:
        uuids = _devices.torch_device_uuids(torch_indices)
        resolved, warnings = _devices.resolve_devices(lib, torch_indices, env, uuids)
        readers = [lib.reader(gpu) for _, gpu in resolved]
    except Exception as exc:
        lib.shutdown()
        if isinstance(exc, DeviceMappingError):
            raise PreflightError([f"measurement.gpu_indices / torch devices: {exc}"]) from exc
        if mode in EXPLICIT:
            raise PreflightError(
                [f"measurement.energy={mode} but {lib.api} device setup fails ({error_text(exc)})"]
            ) from exc
        why = f"NVML device setup failed ({error_text(exc)})"
        return OpenedSource(unavailable_reason=why, no_gpu_reason=why)
    source = GpuSource(lib, readers)
    return OpenedSource(
        source, [info for info, _ in resolved], None, warnings + source.setup_warnings()
    )

"""What llem asks of a GPU, whatever its vendor: the protocols every vendor module implements.

- ``GpuLibrary``: an initialised vendor library (NVML for NVIDIA in ``nvidia``, amdsmi for AMD in
  ``amd``): the GPUs it sees, what each is (``GpuFacts``), a ``GpuReader`` of each one's energy,
  power and the rest of a sample, the system snapshot for ``environment.json``, and the primitives
  of GPU control (power limit and clock locks; the logic around them is ``gpu_control``).
- ``GpuReader``: one GPU's readings for a measurement window, with the ``SensorSpec`` of its
  energy counter and power sensor (resolution, update period, accuracy), from which the energy's
  bounds are computed.

Units are the vendor module's job, converted once where they are read: W, J, MHz, MB (2**20 bytes).
A vendor library's own errors stay inside it: ``is_error`` tells them apart from llem's bugs, and
``error_text`` names them. Measurement receives a ``GpuOpener`` (``llem.devices.gpus.open_gpus``
by default; a test hands it a test double's library) and never imports a vendor's package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from llem.devices.readings import Sample
from llem.vocabulary.processes import OtherProcess

#: the device type torch gives the CPU; any other (``cuda``, ``hpu``, ``mps``) is a vendor's GPU
CPU_DEVICE = "cpu"


def on_gpu(device_type: str | None) -> bool:
    """True for a run placed on a GPU, whatever torch calls the vendor's device (its library's
    ``torch_device_type``)."""
    return device_type is not None and device_type != CPU_DEVICE


class GpuUnavailable(Exception):
    """No vendor library can be used; ``str(exc)`` is the reason, e.g.
    ``NVMLError_LibraryNotFound: ...``."""


class LibraryMissing(GpuUnavailable):
    """The vendor's Python package is not importable (raised by a vendor's opener)."""


class GpuControlError(Exception):
    """A read or a change the vendor library refused; ``kind`` is ``permission``,
    ``not_supported`` or ``failed``; ``str(exc)`` says what and why, ``detail`` the library's own
    error (``NVMLError_NoPermission: Insufficient Permissions``)."""

    def __init__(self, message: str, kind: str, detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.detail = detail


def error_text(exc: BaseException) -> str:
    """``NVMLError_GpuIsLost: GPU is lost`` style text for an exception, on one line (amdsmi's
    own text spans two)."""
    text = " ".join(str(exc).split())
    name = type(exc).__name__
    return f"{name}: {text}" if text and text != name else name


@dataclass(frozen=True)
class Gpu:
    """A physical GPU as its vendor library numbers it (``index``; NVML and amdsmi both number
    every GPU of the machine, whatever ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` say);
    ``handle`` is the library's own, opaque elsewhere."""

    index: int
    handle: Any
    uuid: str


@dataclass(frozen=True)
class GpuFacts:
    """What a GPU is: name, total memory (MB), peak memory bandwidth (bytes/s), enforced power
    limit (W) and the default power limit it ships with (W, whatever limit is set now); each None
    the vendor library cannot report has its reason in ``null_reasons``."""

    name: str
    memory_total_mb: float | None
    memory_bandwidth_bytes_per_s: float | None
    power_limit_w: float | None
    null_reasons: Mapping[str, str] = field(default_factory=dict)
    default_power_limit_w: float | None = None


@dataclass(frozen=True)
class SensorSpec:
    """How exact a GPU's energy readings are, as its vendor documents them (the sources are named
    in ``source``): the counter's step (J) and refresh period (s), the power sensor's accuracy
    (relative, and absolute in W: the larger applies), and the length of the moving average behind
    a power reading (s; 0 for an instantaneous one) and the name of that averaged reading."""

    counter_resolution_j: float
    counter_update_s: float
    sensor_relative: float
    sensor_absolute_w: float
    power_averaging_s: float
    source: str
    averaged_reading: str = ""


#: the GPUs a runtime shows, in its order, each with the partition (MIG) UUID it selects or None
Visible = list[tuple[Gpu, str | None]]


class GpuReader(Protocol):
    """One GPU's readings during a window (see ``llem.devices.nvidia_reader`` for NVIDIA's)."""

    uuid: str
    has_counter: bool  # an energy counter is read; else energy is integrated from power
    power_api: str | None  # "instant", "average" (a moving average) or None: no power reading

    def sensor(self) -> SensorSpec: ...

    def read_counter_j(self) -> float:
        """The energy counter in J (since an arbitrary origin; wrap-around undone). Raises the
        vendor's error."""
        ...

    def read_power_w(self) -> float | None: ...

    def read_sample(self, now: float) -> Sample:
        """Everything the sampler records; raises the vendor's error only when the primary reading
        (power on a GPU without a counter) fails."""
        ...

    def read_temperature_c(self) -> float | None: ...

    def other_processes(self, is_own: Callable[[int], bool]) -> list[OtherProcess] | None:
        """Compute processes on this GPU for which ``is_own(pid)`` is false; None: cannot list."""
        ...


class GpuLibrary(Protocol):
    """An initialised vendor library."""

    vendor: str  # "nvidia" | "amd": what result.json records
    api: str  # "NVML" | "amdsmi": how messages name it; "nvml"/"amdsmi" tag the energy method
    visible_devices_var: str  # the variable that numbers the devices torch sees
    torch_device_type: str  # what torch calls the vendor's GPUs: "cuda" for NVIDIA and ROCm

    def shutdown(self) -> None: ...

    def is_error(self, exc: BaseException) -> bool:
        """True for the library's own errors (anything else is a bug, and propagates)."""
        ...

    def gpus(self) -> list[Gpu]: ...

    def name(self, gpu: Gpu) -> str: ...

    def partition_uuids(self, gpu: Gpu) -> list[str]:
        """UUIDs of ``gpu``'s partitions (NVIDIA's MIG instances); empty where it has none."""
        ...

    def reader(self, gpu: Gpu) -> GpuReader: ...

    def visible(self, inv: Inventory, env: Mapping[str, str]) -> tuple[Visible, str]:
        """(the GPUs the vendor's runtime shows torch under ``env``'s visibility variables, in
        torch's order, each with the partition UUID it selects or None; those variables as
        messages show them: ``CUDA_VISIBLE_DEVICES is '1,3'``)."""
        ...

    def order_warning(self, inv: Inventory, env: Mapping[str, str]) -> str | None:
        """Why torch may number ``inv``'s GPUs unlike the library under ``env`` (None: it
        cannot)."""
        ...

    def facts(self, gpu: Gpu) -> GpuFacts: ...

    def snapshot(self) -> dict[str, Any]:
        """``{"driver_version", "gpus": [{index, name, uuid, memory_total_mb}], "unavailable":
        {key: reason}}`` for ``environment.json``."""
        ...

    def persistence_off(self) -> list[int]:
        """Indices of GPUs whose driver state is dropped when idle (NVIDIA persistence mode off);
        empty when the library cannot say or the vendor has no such mode."""
        ...

    # ---- control primitives: W and MHz; each raises ``GpuControlError``
    def power_limit_w(self, gpu: Gpu) -> float: ...

    def enforced_power_limit_w(self, gpu: Gpu) -> float: ...

    def power_limit_range_w(self, gpu: Gpu) -> tuple[float, float]: ...

    def set_power_limit_w(self, gpu: Gpu, watts: float) -> None: ...

    def clock_mhz(self, gpu: Gpu, domain: str) -> int:
        """The clock running now; ``domain`` is ``sm`` or ``memory``."""
        ...

    def supported_clocks_mhz(self, gpu: Gpu, domain: str) -> list[int]: ...

    def lock_clocks(self, gpu: Gpu, domain: str, lo: int, hi: int) -> None: ...

    def reset_clocks(self, gpu: Gpu, domain: str) -> None: ...


def normalise_uuid(uuid: str) -> str:
    """Lower-case UUID without its ``GPU-``/``MIG-`` prefix (torch reports it bare)."""
    u = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if u.startswith(prefix):
            return u[len(prefix) :]
    return u


def visibility_shown(var: str, value: str | None) -> str:
    """A visibility variable as messages show it: ``CUDA_VISIBLE_DEVICES is '1,3'``."""
    return f"{var} is " + ("unset" if value is None else repr(value))


class Inventory:
    """A vendor library's GPUs, plus their partitions (MIG instances) when asked for."""

    def __init__(self, lib: GpuLibrary) -> None:
        self.lib = lib
        self.gpus: list[Gpu] = lib.gpus()
        self._migs: dict[str, Gpu] | None = None  # MIG uuid -> parent GPU

    def migs(self) -> dict[str, Gpu]:
        if self._migs is None:
            self._migs = {
                normalise_uuid(mig): gpu
                for gpu in self.gpus
                for mig in self.lib.partition_uuids(gpu)
            }
        return self._migs

    def by_uuid(self, uuid: str, prefix: bool = False) -> tuple[Gpu | None, str | None]:
        """(parent GPU, MIG uuid or None) for a GPU or MIG UUID; unique prefixes when ``prefix``."""
        want = normalise_uuid(uuid)

        def match(key: str) -> bool:
            return key.startswith(want) if prefix else key == want

        hits = [g for g in self.gpus if match(normalise_uuid(g.uuid))]
        if hits:  # more than one: an ambiguous prefix
            return (hits[0], None) if len(hits) == 1 else (None, None)
        keys = [k for k in self.migs() if match(k)]
        return (self.migs()[keys[0]], "MIG-" + keys[0]) if len(keys) == 1 else (None, None)


#: opens a vendor library, or raises ``GpuUnavailable``
GpuOpener = Callable[[], GpuLibrary]

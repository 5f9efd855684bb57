"""Opening the GPUs of this machine: the first vendor library that starts.

``open_gpus()`` tries each vendor of ``VENDORS`` in turn and returns the first ``GpuLibrary`` that
initialises. When none does it raises ``GpuUnavailable`` with every vendor's reason, leaving out
the vendors whose Python package is not installed at all (``LibraryMissing``) unless no vendor got
further than that: on a machine without amdsmi the reason is NVML's alone, as it always was.

``gpu_device_type(gpus)`` is what torch calls the GPUs of the library ``gpus`` opens (a run's GPUs
measured whatever llem's own device, such as a server's named ones).

``RunGpus`` is a run's: it opens the library at the first ask and lends the same one to every
part of the run that asks (environment, pre-flight, GPU settings, the measurement session), until
the run closes it (``with``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from llem.devices.amd import init_amdsmi
from llem.devices.gpu import GpuLibrary, GpuOpener, GpuUnavailable, LibraryMissing
from llem.devices.nvidia import Nvml, init_nvml

#: (vendor, its opener), in the order they are tried
VENDORS: list[tuple[str, Callable[[], GpuLibrary]]] = [
    ("nvidia", init_nvml),
    ("amd", init_amdsmi),
]


def open_gpus() -> GpuLibrary:
    """The first vendor library that starts. Raises ``GpuUnavailable`` naming why none did."""
    failures: list[GpuUnavailable] = []
    for _, opener in VENDORS:
        try:
            return opener()
        except GpuUnavailable as exc:
            failures.append(exc)
    present = [f for f in failures if not isinstance(f, LibraryMissing)] or failures[:1]
    raise GpuUnavailable("; ".join(str(f) for f in present))


#: what torch calls GPUs whose vendor llem cannot tell (no vendor library starts): the first
#: vendor's word, which ROCm's torch shares
UNKNOWN_VENDOR_DEVICE = Nvml.torch_device_type


def gpu_device_type(gpus: GpuOpener = open_gpus) -> str:
    """What torch calls the GPUs of the library ``gpus`` opens (its ``torch_device_type``);
    ``UNKNOWN_VENDOR_DEVICE`` where none starts."""
    try:
        lib = gpus()
    except GpuUnavailable:
        return UNKNOWN_VENDOR_DEVICE
    try:
        return lib.torch_device_type
    finally:
        lib.shutdown()


class RunGpus:
    """One run's GPU library, a ``GpuOpener`` that opens it at the first ask and lends the same
    library to every later one; a library that cannot start is tried once, its
    ``GpuUnavailable`` raised to every ask. The borrowers' ``shutdown()`` leaves it open: the run
    shuts it down once, with ``close()``, on every way out."""

    def __init__(self, opener: GpuOpener = open_gpus) -> None:
        self._opener = opener
        self._lib: GpuLibrary | None = None
        self._failure: GpuUnavailable | None = None

    def __call__(self) -> GpuLibrary:
        if self._failure is not None:
            raise self._failure
        if self._lib is None:
            try:
                self._lib = self._opener()
            except GpuUnavailable as exc:
                self._failure = exc
                raise
        return cast(GpuLibrary, _Lent(self._lib))

    def close(self) -> None:
        """Shut the library down; the next ask opens it afresh (the next run's)."""
        lib, self._lib, self._failure = self._lib, None, None
        if lib is not None:
            lib.shutdown()

    def __enter__(self) -> RunGpus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Lent:
    """The run's library as lent to one of its parts: all of it but ``shutdown``."""

    def __init__(self, lib: GpuLibrary) -> None:
        self._lib = lib

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lib, name)

    def shutdown(self) -> None:
        """Nothing: the run shuts its library down (``RunGpus.close``)."""

"""Opening the GPUs of this machine: the first vendor library that starts.

``open_gpus()`` tries each vendor of ``VENDORS`` in turn and returns the first ``GpuLibrary`` that
initialises. When none does it raises ``GpuUnavailable`` with every vendor's reason, leaving out
the vendors whose Python package is not installed at all (``LibraryMissing``) unless no vendor got
further than that: on a machine without amdsmi the reason is NVML's alone, as it always was.
"""

from __future__ import annotations

from collections.abc import Callable

from llem.devices.amd import init_amdsmi
from llem.devices.gpu import GpuLibrary, GpuUnavailable, LibraryMissing
from llem.devices.nvidia import init_nvml

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

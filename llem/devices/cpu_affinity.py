"""Which CPU packages the process may run on, next to the packages whose energy is read.

llem reads every package of the host: a RAPL counter counts a whole socket, whoever runs on it,
and a process pinned to one socket (``taskset``, ``numactl``, a SLURM allocation) still makes
the others work (interrupts, the GPU driver's threads, memory traffic). The result says which
packages the process's affinity covers so a reader sees what the figure holds beyond the run.
Affinity is where the process *may* run, not where it ran; a package number is the CPU's
``topology/physical_package_id``, the number in the zone's name ``package-N``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from llem.devices.powercap import ReadText, read_file_text

DEFAULT_CPU_ROOT = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class PackageCoverage:
    """The packages read and those the process may run on (None with ``reason`` if unknown)."""

    packages_read: tuple[int, ...]
    packages_of_process: tuple[int, ...] | None
    reason: str | None

    @property
    def note(self) -> str:
        read = ", ".join(map(str, self.packages_read)) or "none"
        if self.packages_of_process is None:
            return f"packages read: {read}; the process's packages are unknown ({self.reason})"
        mine = ", ".join(map(str, self.packages_of_process)) or "none"
        others = [p for p in self.packages_read if p not in self.packages_of_process]
        text = f"packages read: {read}; the process may run on package(s) {mine}"
        if others:
            text += (
                f"; package(s) {', '.join(map(str, others))} read too: their energy (idle, other"
                " processes, the work this process causes there) is inside the figure"
            )
        return text


def _current_affinity() -> set[int]:
    return set(os.sched_getaffinity(0))


def process_packages(
    cpu_root: str | Path = DEFAULT_CPU_ROOT,
    cpus: Iterable[int] | None = None,
    read_text: ReadText = read_file_text,
) -> tuple[tuple[int, ...] | None, str | None]:
    """(the packages of ``cpus``, None) or (None, why); ``cpus`` defaults to this process's
    affinity (``os.sched_getaffinity``)."""
    try:
        chosen = sorted(_current_affinity() if cpus is None else set(cpus))
    except (AttributeError, OSError) as exc:  # not Linux, or the call refused
        return None, f"the process's CPU affinity could not be read: {exc}"
    packages: set[int] = set()
    for cpu in chosen:
        path = Path(cpu_root) / f"cpu{cpu}" / "topology" / "physical_package_id"
        try:
            packages.add(int(read_text(path).strip()))
        except (OSError, ValueError) as exc:
            return None, f"{path} could not be read: {exc}"
    return tuple(sorted(packages)), None


def package_coverage(
    packages_read: Iterable[int],
    cpu_root: str | Path = DEFAULT_CPU_ROOT,
    cpus: Iterable[int] | None = None,
    read_text: ReadText = read_file_text,
) -> PackageCoverage:
    """The packages read (``Discovery.packages``) next to those the process may run on."""
    mine, reason = process_packages(cpu_root, cpus, read_text)
    return PackageCoverage(tuple(sorted(set(packages_read))), mine, reason)

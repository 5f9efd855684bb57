"""Planted powercap trees for tests: RAPL zones as files under a temporary folder, and counters
whose readings the test decides.

``plant_zone`` writes one zone (``name``, ``energy_uj``, ``max_energy_range_uj``);
``plant_cpuinfo`` a ``/proc/cpuinfo`` naming the CPU's vendor (hand it to ``RaplReader(cpuinfo=)``:
it says what a package's die zones read). A
``RaplReader`` built on the tree reads the files as they are; hand it ``read_text=`` one of the
readers below to make the counters move:

- ``ScriptedCounters``: each read of a planted ``energy_uj`` returns the next value of its script
  (the last one repeats); an exception in a script is raised instead (``PermissionError()``:
  a root-only counter).
- ``PoweredCounters``: each planted counter integrates a power the test sets
  (``set_power_w``) over a clock (the session's virtual clock), wrapping past its range.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

MAX_UJ = 262_143_328_850  # the common max_energy_range_uj of a package counter


def plant_zone(root: Path, folder: str, name: str, energy_uj: int, max_uj: int = MAX_UJ) -> Path:
    """Write the zone ``root/folder`` named ``name``; returns its ``energy_uj`` file."""
    d = root / folder
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    (d / "energy_uj").write_text(f"{energy_uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d / "energy_uj"


def plant_cpuinfo(path: Path, vendor: str | None, cpus: int = 2) -> Path:
    """Write a ``/proc/cpuinfo`` at ``path`` whose ``cpus`` processors name ``vendor``
    (``AuthenticAMD``, ``GenuineIntel``, ...; None: no vendor_id line)."""
    blocks = []
    for cpu in range(cpus):
        lines = [f"processor\t: {cpu}"]
        if vendor is not None:
            lines.append(f"vendor_id\t: {vendor}")
        lines += ["cpu family\t: 23", "model name\t: a planted CPU", ""]
        blocks.append("\n".join(lines))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(blocks))
    return path


class ScriptedCounters:
    """A ``read_text`` whose planted files answer from their scripts, read after read."""

    def __init__(self, scripts: Mapping[Path, Sequence[int | BaseException]]) -> None:
        self._scripts = {p: list(s) for p, s in scripts.items()}
        self.reads: dict[Path, int] = dict.fromkeys(self._scripts, 0)
        self._lock = threading.Lock()

    def __call__(self, path: Path) -> str:
        if path not in self._scripts:
            return path.read_text()
        with self._lock:
            script = self._scripts[path]
            value = script[min(self.reads[path], len(script) - 1)]
            self.reads[path] += 1
        if isinstance(value, BaseException):
            raise value
        return f"{value}\n"


class PoweredCounters:
    """A ``read_text`` whose planted counters count the energy of a power the test sets."""

    def __init__(self, files: Sequence[Path], clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._uj = {p: int(p.read_text()) for p in files}
        self._max = {p: int((p.parent / "max_energy_range_uj").read_text()) for p in files}
        self._w = dict.fromkeys(files, 0.0)
        self._t = clock()

    def _advance(self) -> None:
        now = self._clock()
        for p, watts in self._w.items():
            self._uj[p] = (self._uj[p] + round(watts * (now - self._t) * 1e6)) % self._max[p]
        self._t = now

    def set_power_w(self, path: Path, watts: float) -> None:
        with self._lock:
            self._advance()
            self._w[path] = watts

    def __call__(self, path: Path) -> str:
        if path not in self._uj:
            return path.read_text()
        with self._lock:
            self._advance()
            return f"{self._uj[path]}\n"

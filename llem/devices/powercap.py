"""RAPL zones of Linux powercap: which exist, which are added, and snapshots of their counters.

Layout (``/sys/class/powercap``, every zone listed flat, sub-zones included):

- ``intel-rapl:N`` named ``package-N`` (``package-N-die-M`` where a package has several dies):
  the CPU package (cores, caches, memory controller, integrated graphics). Its sub-zones
  ``intel-rapl:N:M`` are named ``core`` and ``uncore`` (inside the package: never added to it)
  or ``dram`` (the memory attached to the package: *not* inside the package figure, so it is a
  domain of its own, ``dram-N``).
- ``intel-rapl:N`` named ``psys`` (Skylake and later clients): the platform, which already
  contains the packages. It is listed and never added.
- ``intel-rapl-mmio:N`` named ``package-N``: the same package counter again, read through memory
  mapped registers (Intel clients with the processor thermal device). Adding both counts the
  package twice (CodeCarbon PR #950). llem keeps the MSR zone (``intel-rapl``): every RAPL
  machine has it, servers have no MMIO zone, and it carries the core/uncore/dram sub-zones, so
  results from clients and servers come from the same counters. An MMIO zone (and its
  sub-zones) is read only when no MSR zone lists the same package.
- AMD: since Linux 5.11 (Zen 1/2, family 17h; 19h and 1Ah later) the same ``intel_rapl_msr``
  driver lists AMD sockets under the same names: ``intel-rapl:N`` named ``package-N`` with a
  ``core`` sub-zone; AMD has no ``dram`` and no ``psys`` zone. On multi-die parts (Threadripper,
  EPYC Zen 1/2) each die is listed (``package-0-die-0``, ``package-0-die-1``) but mirrors the one
  socket counter, where an Intel die has its own: ``cpu_energy`` counts a package's dies once or
  sums them as the CPU's vendor says (``rapl_scope``), never from the counters' readings.
  The older ``amd_energy`` hwmon driver (Linux 5.8-5.12, removed in 5.13) is not powercap and is
  not read here.

Each counter ``energy_uj`` counts microjoules and wraps to 0 past ``max_energy_range_uj``. Since
Linux 5.10 (CVE-2020-8694, "Platypus") ``energy_uj`` is readable by root only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_POWERCAP_ROOT = Path("/sys/class/powercap")

ReadText = Callable[[Path], str]
"""How a file is read (``Path.read_text`` by default; tests hand in their own)."""

_ZONE_DIR = re.compile(r"(intel-rapl|intel-rapl-mmio):(\d+)(?::(\d+))?")
_PACKAGE_NAME = re.compile(r"package-(\d+)(?:-die-(\d+))?")
ADDED_KINDS = ("package", "dram")

RAPL_PERMISSION_HINT = (
    "energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694): run as root, or, on a "
    "machine only you use, make it readable (sudo chmod a+r /sys/class/powercap/intel-rapl*/"
    "energy_uj; undone at reboot; a udev rule makes it last)"
)


def read_file_text(path: Path) -> str:
    return path.read_text()


@dataclass(frozen=True)
class Zone:
    """One powercap zone: the kernel's name for it, its folder and what llem makes of it.

    ``kind`` is package, dram, core, uncore, psys or other; ``package`` the package number its
    name (or its parent's) carries; ``interface`` msr (``intel-rapl``) or mmio
    (``intel-rapl-mmio``); ``max_energy_range_uj`` None where it could not be read (a wrap of
    that counter then makes its domain null).
    """

    name: str
    path: Path
    kind: str
    interface: str
    package: int | None
    die: int | None
    max_energy_range_uj: int | None

    @property
    def energy_uj_path(self) -> Path:
        return self.path / "energy_uj"

    @property
    def domain(self) -> str | None:
        """package-N or dram-N for the zones that are added; None for the others."""
        if self.kind in ADDED_KINDS and self.package is not None:
            return f"{self.kind}-{self.package}"
        return None


@dataclass(frozen=True)
class SkippedZone:
    zone: Zone
    why: str


@dataclass(frozen=True)
class Discovery:
    """The zones read (packages and DRAM), the zones left out with why, or why there are none."""

    root: Path
    zones: tuple[Zone, ...]
    skipped: tuple[SkippedZone, ...]
    unavailable_reason: str | None

    @property
    def packages(self) -> tuple[int, ...]:
        return tuple(sorted({z.package for z in self.zones if z.package is not None}))


def _kind_of(name: str) -> tuple[str, int | None, int | None]:
    match = _PACKAGE_NAME.fullmatch(name)
    if match:
        die = int(match.group(2)) if match.group(2) is not None else None
        return "package", int(match.group(1)), die
    if name in ("dram", "core", "uncore", "psys"):
        return name, None, None
    return "other", None, None


def _read_int(path: Path, read_text: ReadText) -> int | None:
    try:
        return int(read_text(path).strip())
    except (OSError, ValueError):
        return None


def _read_name(folder: Path, read_text: ReadText) -> str:
    try:
        return read_text(folder / "name").strip()
    except OSError:
        return folder.name


def _zone(folder: Path, parent: Zone | None, read_text: ReadText) -> Zone:
    name = _read_name(folder, read_text)
    kind, package, die = _kind_of(name)
    if parent is not None and package is None:
        package = parent.package
    return Zone(
        name=name,
        path=folder,
        kind=kind,
        interface="mmio" if folder.name.startswith("intel-rapl-mmio") else "msr",
        package=package,
        die=die,
        max_energy_range_uj=_read_int(folder / "max_energy_range_uj", read_text),
    )


def list_zones(root: Path, read_text: ReadText = read_file_text) -> list[Zone]:
    """Every RAPL zone under ``root`` (top-level zones first, each followed by its sub-zones)."""
    if not root.is_dir():
        return []
    folders = []
    for entry in root.iterdir():
        match = _ZONE_DIR.fullmatch(entry.name)
        if match and entry.is_dir():
            sub = -1 if match.group(3) is None else int(match.group(3))
            folders.append(((match.group(1), int(match.group(2)), sub), entry))
    zones: list[Zone] = []
    parents: dict[tuple[str, int], Zone] = {}
    for (prefix, number, sub), folder in sorted(folders):
        zone = _zone(folder, parents.get((prefix, number)) if sub >= 0 else None, read_text)
        if sub < 0:
            parents[(prefix, number)] = zone
        zones.append(zone)
    return zones


def _why_not_added(zone: Zone, msr_packages: set[int | None]) -> str | None:
    if zone.kind == "psys":
        return "psys is the platform, which already contains the packages: not added to them"
    if zone.kind in ("core", "uncore"):
        return f"{zone.kind} is inside package-{zone.package}: not added to it"
    if zone.kind not in ADDED_KINDS or zone.package is None:
        return f"zone named {zone.name!r} is not a package or DRAM domain: not added"
    if zone.interface == "mmio" and zone.package in msr_packages:
        return (
            f"{zone.name} of package-{zone.package} again: the MSR zone (intel-rapl) read "
            "instead; adding both would count it twice"
        )
    return None


def discover(
    root: str | Path = DEFAULT_POWERCAP_ROOT, read_text: ReadText = read_file_text
) -> Discovery:
    """The package and DRAM zones under ``root`` to read, and every other zone with why not."""
    root = Path(root)
    zones = list_zones(root, read_text)
    if not zones:
        no_rapl = f"no RAPL on this machine: {root} has no intel-rapl zones"
        return Discovery(root, (), (), no_rapl)
    msr_packages = {z.package for z in zones if z.interface == "msr" and z.kind == "package"}
    chosen: list[Zone] = []
    skipped: list[SkippedZone] = []
    for zone in zones:
        why = _why_not_added(zone, msr_packages)
        if why is None:
            chosen.append(zone)
        else:
            skipped.append(SkippedZone(zone, why))
    reason = None if chosen else f"no RAPL package or DRAM zone under {root}"
    return Discovery(root, tuple(chosen), tuple(skipped), reason)


@dataclass(frozen=True)
class Reading:
    """One counter read: its value in microjoules, or why it could not be read."""

    zone: Zone
    energy_uj: int | None
    error: str | None


@dataclass(frozen=True)
class Snapshot:
    """Every chosen zone's counter at one moment (``t_s``: the monotonic clock, seconds, taken
    before the first read; ``read_s``: how long the reads took after it)."""

    t_s: float
    readings: tuple[Reading, ...]
    unavailable_reason: str | None
    read_s: float = 0.0

    def reading(self, zone: Zone) -> Reading | None:
        return next((r for r in self.readings if r.zone.path == zone.path), None)


def _error_text(path: Path, exc: OSError | ValueError) -> str:
    if isinstance(exc, PermissionError):
        return f"permission denied reading {path}: {RAPL_PERMISSION_HINT}"
    if isinstance(exc, FileNotFoundError):
        return f"{path} is gone (the zone vanished)"
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{path} could not be read: {detail}"


def read_counter(zone: Zone, read_text: ReadText = read_file_text) -> Reading:
    path = zone.energy_uj_path
    try:
        return Reading(zone, int(read_text(path).strip()), None)
    except (OSError, ValueError) as exc:
        return Reading(zone, None, _error_text(path, exc))


def take_snapshot(
    discovery: Discovery,
    read_text: ReadText = read_file_text,
    clock: Callable[[], float] = time.monotonic,
) -> Snapshot:
    """Read every chosen zone's ``energy_uj`` once; an unreadable one carries its reason."""
    t_s = clock()
    readings = tuple(read_counter(z, read_text) for z in discovery.zones)
    return Snapshot(t_s, readings, discovery.unavailable_reason, max(0.0, clock() - t_s))

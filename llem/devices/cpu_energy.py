"""CPU package and DRAM energy (J) between powercap snapshots, wrap-around undone.

A counter wraps to 0 past ``max_energy_range_uj``; between two reads llem can undo one wrap and
no more, so two reads must be closer than ``max_energy_range_uj / max power``. With the common
range of 262,143,328,850 uJ and a package drawing at most 500 W that is 524 s; a server's DRAM
range (about 65.7 kJ) gives 131 s at the same 500 W. ``max_read_interval_s`` says it for any
range and power; a window longer than that must be read in between (``energy_over`` takes every
snapshot of a window and undoes one wrap per step). A step longer than the interval makes its
domain null with the reason, because more than one wrap cannot be ruled out.

Every domain (package-N, dram-N) has its own figure, null with its reason where it could not be
read; nothing unreadable becomes 0. A package listed once per die is summed over its dies or
counted once through its first die's zone as the CPU's vendor says (``rapl_scope``), never
from whether the dies' readings agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from llem.devices.powercap import (
    DEFAULT_POWERCAP_ROOT,
    Discovery,
    ReadText,
    Snapshot,
    Zone,
    discover,
    read_file_text,
    take_snapshot,
)
from llem.devices.rapl_scope import DEFAULT_CPUINFO, CounterScope, counter_scope

DEFAULT_MAX_POWER_W = 500.0
"""The power a domain is assumed never to exceed: the highest package TDP of 2025's server CPUs
(AMD EPYC 9965, Intel Xeon 6980P: 500 W). It only sets how often counters must be read."""


def max_read_interval_s(
    max_energy_range_uj: int, max_power_w: float = DEFAULT_MAX_POWER_W
) -> float:
    """The longest time (s) between two reads in which a counter drawing ``max_power_w`` wraps at
    most once: ``max_energy_range_uj`` (uJ) / 1e6 / ``max_power_w`` (W)."""
    if max_energy_range_uj <= 0 or max_power_w <= 0:
        raise ValueError("max_energy_range_uj and max_power_w must be positive")
    return max_energy_range_uj / 1e6 / max_power_w


@dataclass(frozen=True)
class DomainEnergy:
    """One domain's energy over a window: ``value_j`` in joules, or None and the reason.

    ``zones`` are the counters' folders listed for it; ``note`` says how they were combined
    where a package has several dies; ``counters`` how many were read into the figure (one die's
    zone for a socket counter listed per die).
    """

    domain: str
    value_j: float | None
    reason: str | None
    zones: tuple[str, ...]
    note: str | None = None
    counters: int = 1


@dataclass(frozen=True)
class CpuEnergy:
    """The energy of each package and DRAM domain between the first and the last snapshot.

    ``duration_s`` runs from the first snapshot's time to the last's; ``last_read_s`` is how long
    the last snapshot's reads took after its time; ``max_power_w`` the power no domain is assumed
    to exceed (None: not assumed)."""

    duration_s: float
    domains: tuple[DomainEnergy, ...]
    unavailable_reason: str | None
    last_read_s: float = 0.0
    max_power_w: float | None = None

    def total(self, kind: str) -> DomainEnergy:
        """All domains of ``kind`` (package or dram) summed, null with a reason if any one is."""
        if self.unavailable_reason is not None:
            return DomainEnergy(f"{kind}s", None, self.unavailable_reason, ())
        parts = [d for d in self.domains if d.domain.startswith(kind + "-")]
        if not parts:
            why = f"no {kind} zone in powercap"
            if kind == "dram":
                why += ": this CPU's RAPL has no DRAM domain (AMD; most Intel clients)"
            return DomainEnergy(f"{kind}s", None, why, ())
        zones = tuple(z for d in parts for z in d.zones)
        missing = [d for d in parts if d.value_j is None]
        if missing:
            reason = "; ".join(f"{d.domain}: {d.reason}" for d in missing)
            return DomainEnergy(f"{kind}s", None, reason, zones)
        value_j = sum(d.value_j or 0.0 for d in parts)
        return DomainEnergy(
            f"{kind}s", value_j, None, zones, counters=sum(d.counters for d in parts)
        )


def _step_uj(
    zone: Zone, before_uj: int, after_uj: int, gap_s: float, max_power_w: float | None
) -> tuple[int | None, str | None]:
    """The counter's progress between two reads, one wrap undone, or None and why."""
    top = zone.max_energy_range_uj
    if top is not None and top > 0 and max_power_w is not None:
        limit_s = max_read_interval_s(top, max_power_w)
        if gap_s > limit_s:
            return None, (
                f"{gap_s:.0f} s between two reads of {zone.energy_uj_path}, longer than the "
                f"{limit_s:.0f} s in which it can wrap at {max_power_w:g} W: more than one wrap "
                "cannot be ruled out (read it more often)"
            )
    delta = after_uj - before_uj
    if delta >= 0:
        return delta, None
    if top is None:
        return None, (
            f"{zone.energy_uj_path} went back and its max_energy_range_uj could not be read: "
            "the wrap cannot be undone"
        )
    return delta + top, None


def _zone_uj(
    zone: Zone, snapshots: Sequence[Snapshot], max_power_w: float | None
) -> tuple[int | None, str | None]:
    values: list[int] = []
    for i, snap in enumerate(snapshots):
        r = snap.reading(zone)
        if r is None or r.energy_uj is None:
            error = r.error if r is not None else f"{zone.energy_uj_path} was not read"
            if i == 0:
                return None, error
            return (
                None,
                f"counter failed during the window (read {i + 1} of {len(snapshots)}): {error}",
            )
        values.append(r.energy_uj)
    total_uj = 0
    for i in range(1, len(values)):
        gap_s = snapshots[i].t_s - snapshots[i - 1].t_s
        delta, why = _step_uj(zone, values[i - 1], values[i], gap_s, max_power_w)
        if delta is None:
            return None, why
        total_uj += delta
    return total_uj, None


def _dies(
    zones: Sequence[Zone], scope: CounterScope | None
) -> tuple[Sequence[Zone], str | None, str | None]:
    """The zones to add for one package listed once per die, the note saying how, or the
    reason they cannot be added (``rapl_scope``)."""
    names = ", ".join(z.name for z in zones)
    if scope is None or scope.per is None:
        why = scope.reason if scope is not None else "the CPU's vendor was not read"
        return zones, None, f"{len(zones)} dies ({names}): {why}"
    if scope.per == "package":
        return (
            zones[:1],
            (
                f"{len(zones)} dies ({names}) list one socket counter ({scope.vendor}: the package "
                f"counter is per socket): counted once, through {zones[0].name}"
            ),
            None,
        )
    return zones, f"sum of {len(zones)} dies ({scope.vendor}: each die has its own counter)", None


def _domain(
    name: str,
    zones: Sequence[Zone],
    snapshots: Sequence[Snapshot],
    max_power_w: float | None,
    scope: CounterScope | None,
) -> DomainEnergy:
    paths = tuple(str(z.path) for z in zones)
    note = None
    if len(zones) > 1:
        zones, note, why_not = _dies(zones, scope)
        if why_not is not None:
            return DomainEnergy(name, None, why_not, paths)
    total_uj = 0
    for zone in zones:
        uj, why = _zone_uj(zone, snapshots, max_power_w)
        if uj is None:
            return DomainEnergy(name, None, why, paths, note)
        total_uj += uj
    return DomainEnergy(name, total_uj / 1e6, None, paths, note, len(zones))


def energy_over(
    snapshots: Sequence[Snapshot],
    max_power_w: float | None = DEFAULT_MAX_POWER_W,
    scope: CounterScope | None = None,
) -> CpuEnergy:
    """Each domain's energy from the first snapshot to the last, step by step (one wrap undone
    per step). ``max_power_w`` None skips the check that steps are short enough; ``scope`` says
    what a package's die zones read (None: unknown, so a package with several dies is null)."""
    if len(snapshots) < 2:
        raise ValueError("energy_over needs at least two snapshots (the window's start and end)")
    first = snapshots[0]
    duration_s = snapshots[-1].t_s - first.t_s
    if first.unavailable_reason is not None:
        return CpuEnergy(duration_s, (), first.unavailable_reason, max_power_w=max_power_w)
    by_domain: dict[str, list[Zone]] = {}
    for reading in first.readings:
        if reading.zone.domain is not None:
            by_domain.setdefault(reading.zone.domain, []).append(reading.zone)
    domains = tuple(_domain(d, zs, snapshots, max_power_w, scope) for d, zs in by_domain.items())
    return CpuEnergy(duration_s, domains, None, snapshots[-1].read_s, max_power_w)


class RaplReader:
    """The host's RAPL packages and DRAM: ``snapshot()`` at a window's start and end (and in
    between, for windows longer than ``max_read_interval_s()``), then ``energy(*snapshots)``.

    Where a package is listed once per die, ``cpuinfo``'s vendor says what the dies read
    (``scope``; None where no package has several dies)."""

    def __init__(
        self,
        root: str | Path = DEFAULT_POWERCAP_ROOT,
        read_text: ReadText = read_file_text,
        clock: Callable[[], float] = time.monotonic,
        max_power_w: float = DEFAULT_MAX_POWER_W,
        cpuinfo: Path = DEFAULT_CPUINFO,
    ) -> None:
        self._read_text = read_text
        self.discovery: Discovery = discover(root, read_text)
        self.clock = clock
        self.max_power_w = max_power_w
        dies = [z for z in self.discovery.zones if z.kind == "package" and z.die is not None]
        self.scope = counter_scope(cpuinfo, read_text) if dies else None

    def snapshot(self) -> Snapshot:
        return take_snapshot(self.discovery, self._read_text, self.clock)

    def energy(self, *snapshots: Snapshot) -> CpuEnergy:
        return energy_over(snapshots, self.max_power_w, self.scope)

    def package_reads(self) -> bool:
        """Whether every CPU package counter reads now (one read of each)."""
        snapshot = self.snapshot()
        return self.energy(snapshot, snapshot).total("package").value_j is not None

    def max_read_interval_s(self) -> float | None:
        """How often (s) the counters must be read so none wraps twice; None without a range."""
        ranges = [z.max_energy_range_uj for z in self.discovery.zones if z.max_energy_range_uj]
        if not ranges:
            return None
        return max_read_interval_s(min(ranges), self.max_power_w)

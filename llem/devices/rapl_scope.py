"""Whether a package's die zones each have a counter or all list the socket's one, from the CPU.

Linux lists a package's RAPL zone once per die (``package-N-die-M``) wherever its CPU topology
has several dies per package. What each die zone reads depends on the vendor, not on the
topology or on the zones' folders (all top-level ``intel-rapl:K``, K the logical die):

- Intel (``GenuineIntel``): the package energy counter is per die (Cascade Lake-AP's two dies
  each have their own ``MSR_PKG_ENERGY_STATUS``): the dies are summed.
- AMD and Hygon (``AuthenticAMD``, ``HygonGenuine``): ``PKG_ENERGY_STAT`` (MSR C001_029B) counts
  the whole socket; every die zone of a package reads that one counter (Zen 1/2 Threadripper and
  EPYC, and parts whose CCDs Linux reports as dies): it is counted once. Linux's own RAPL PMU makes
  the same split (``arch/x86/events/rapl.c``: "AMD CPUs have the scope of RAPL energy-pkg event
  as package, whereas Intel Cascade Lake CPUs have the scope as die").

The zones are read one after another and the counter moves about every millisecond, so two reads
of one counter may differ (by the energy of a tick, tens of mJ at tens of watts): equal readings
say nothing, and llem never decides from them. Another vendor, or a ``/proc/cpuinfo`` without a
``vendor_id``, leaves the scope unknown and a package with several dies null with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llem.devices.powercap import ReadText, read_file_text

DEFAULT_CPUINFO = Path("/proc/cpuinfo")
_SOCKET_COUNTER = ("AuthenticAMD", "HygonGenuine")
_DIE_COUNTER = ("GenuineIntel",)


@dataclass(frozen=True)
class CounterScope:
    """What one die zone of a package reads: ``die`` (its own counter), ``package`` (the socket's
    one counter, listed once per die), or None with ``reason``; ``vendor`` as /proc/cpuinfo
    names it."""

    per: str | None
    vendor: str | None
    reason: str | None = None


def vendor_id(cpuinfo: Path = DEFAULT_CPUINFO, read_text: ReadText = read_file_text) -> str | None:
    """The CPU's ``vendor_id`` in ``cpuinfo``; None where it cannot be read or has none."""
    try:
        text = read_text(cpuinfo)
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "vendor_id":
            return value.strip() or None
    return None


def counter_scope(
    cpuinfo: Path = DEFAULT_CPUINFO, read_text: ReadText = read_file_text
) -> CounterScope:
    """The scope of a package's die zones on this CPU (see the module docstring)."""
    vendor = vendor_id(cpuinfo, read_text)
    if vendor in _SOCKET_COUNTER:
        return CounterScope("package", vendor)
    if vendor in _DIE_COUNTER:
        return CounterScope("die", vendor)
    seen = f"vendor_id {vendor!r}" if vendor else f"no vendor_id in {cpuinfo}"
    return CounterScope(
        None,
        vendor,
        f"{seen}: whether its dies have a counter each (Intel) or list the socket's one "
        "(AMD, Hygon) is unknown, so they are neither summed nor counted once",
    )

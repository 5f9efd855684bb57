"""Opening the host's RAPL counters on the session clock, and how often a window reads them."""

from __future__ import annotations

from pathlib import Path

from llem.devices.cpu_energy import RaplReader
from llem.measure.sampler import Clock

RAPL_READS_PER_INTERVAL = 4
"""Snapshots per ``max_read_interval_s``: a tick a little late still reads well within it."""

DEFAULT_RAPL_READ_EVERY_S = 30.0
"""How often RAPL is read inside a window when no counter states its range."""


def open_rapl(root: str | Path, clock: Clock) -> RaplReader:
    """The host's RAPL reader on the session clock (tests replace it to plant counters)."""
    return RaplReader(root, clock=clock.now)


def rapl_read_every_s(rapl: RaplReader | None) -> float:
    limit = None if rapl is None else rapl.max_read_interval_s()
    return DEFAULT_RAPL_READ_EVERY_S if limit is None else limit / RAPL_READS_PER_INTERVAL

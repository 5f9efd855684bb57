"""CPU package energy from Linux powercap (Intel RAPL; AMD exposes the same files on Zen).

Each top-level zone ``<root>/intel-rapl:N`` whose ``name`` starts with ``package`` has a counter
``energy_uj`` (microjoules, wraps to 0 after ``max_energy_range_uj``). Package energy over a window
is the sum over packages of the counter deltas; the sampler polls the counters at every tick so a
wraparound is caught even when a window is longer than one counter period. Sub-zones (core, uncore,
dram: ``intel-rapl:N:M``) are inside the package figure and ``psys`` overlaps it: neither is added.
On most kernels ``energy_uj`` is readable by root only.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

DEFAULT_POWERCAP_ROOT = "/sys/class/powercap"


class _Zone:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.energy_file = path / "energy_uj"
        self.max_uj = int((path / "max_energy_range_uj").read_text().strip())
        self.last_uj = 0
        self.total_uj = 0

    def read_uj(self) -> int:
        return int(self.energy_file.read_text().strip())


class RaplMeter:
    """Package energy (J) over a window: ``probe()``, then ``begin()``, ``poll()``..., ``end()``."""

    def __init__(self, root: str | Path = DEFAULT_POWERCAP_ROOT) -> None:
        self.root = Path(root)
        self._zones: list[_Zone] = []
        self._lock = threading.Lock()
        self.unavailable_reason: str | None = self.probe()

    def probe(self) -> str | None:
        """None when package counters are readable, else the reason they are not."""
        self._zones = []
        paths = sorted(
            p for p in self.root.glob("intel-rapl:*") if re.fullmatch(r"intel-rapl:\d+", p.name)
        )
        if not paths:
            return f"no RAPL powercap files ({self.root}/intel-rapl:*/energy_uj)"
        problems = []
        for p in paths:
            try:
                name = (p / "name").read_text().strip() if (p / "name").exists() else "package"
                if not name.startswith("package"):
                    continue
                zone = _Zone(p)
                zone.read_uj()
            except (OSError, ValueError) as exc:
                problems.append(
                    f"{p / 'energy_uj'}: {exc.strerror if isinstance(exc, OSError) else exc}"
                )
                continue
            self._zones.append(zone)
        if problems:
            self._zones = []
            return (
                "RAPL package counters not readable ("
                + "; ".join(problems)
                + "); reading them usually needs root"
            )
        if not self._zones:
            return f"no RAPL package zone under {self.root}"
        return None

    @staticmethod
    def _advance(zone: _Zone, now_uj: int) -> None:
        delta = now_uj - zone.last_uj
        if delta < 0:  # the counter wrapped around max_energy_range_uj
            delta += zone.max_uj
        zone.total_uj += delta
        zone.last_uj = now_uj

    def begin(self) -> None:
        with self._lock:
            for z in self._zones:
                z.last_uj = z.read_uj()
                z.total_uj = 0

    def poll(self) -> None:
        """Fold the counters' progress since the last read into the totals (thread-safe)."""
        if self.unavailable_reason is not None:
            return
        with self._lock:
            try:
                for z in self._zones:
                    self._advance(z, z.read_uj())
            except (OSError, ValueError):
                pass  # end() reports the failure

    def end(self) -> tuple[float | None, str | None]:
        """(package joules, None) or (None, reason)."""
        if self.unavailable_reason is not None:
            return None, self.unavailable_reason
        with self._lock:
            try:
                for z in self._zones:
                    self._advance(z, z.read_uj())
            except (OSError, ValueError) as exc:
                return None, f"RAPL counter read failed: {exc}"
            return sum(z.total_uj for z in self._zones) / 1e6, None

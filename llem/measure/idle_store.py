"""Idle baselines kept on disk, per GPU, for the processes that come after this one.

With one process per sweep point (``submitit_local``, joblib, SLURM) every point starts in a new
process, often right after the previous point's process left the GPU hot, so a baseline measured
at its start measures a hot GPU (leakage power rises with temperature), not an idle one. So each
GPU's baseline is also written to ``<cache dir>/idle_baselines.json`` (``LLEM_CACHE_DIR``, default
``~/.cache/llem``, as for llem's other caches), by GPU UUID, with its power, bound, temperature and
the wall-clock time it was measured; for each GPU only the coolest trustworthy baseline (energy
read, power above 0) is kept, until it is older than ``measurement.idle_cache_max_age_s`` (an hour
by default), after which the next measurement replaces it.

A later process measuring the same GPUs (``MeasurementSession.start()``) uses the stored baselines
while they are younger than that age, after waiting (``measurement.cooldown_s`` at most) for every
GPU to be back within ``measurement.idle_temp_margin_c`` of their temperature; it never measures a
GPU that is hotter than its stored idle temperature in their place. The result says so:
``energy.idle_source`` is ``cached``, with ``idle_age_s``, ``idle_measured_at`` and
``idle_temperature_c``.

A file that cannot be read or written is a warning, never an error: the baseline is then measured
as usual.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from llem.atomic import atomic_write_json
from llem.config.schema import MeasurementConfig
from llem.measure.idle import IdleBaseline, IdleSource

log = logging.getLogger(__name__)

FILE_NAME = "idle_baselines.json"
FORMAT = 1


@dataclass(frozen=True)
class StoredIdle:
    """One GPU's idle baseline as stored: power and its bound (W), mean temperature (C), when."""

    power_w: float
    power_uncertainty_w: float | None
    temperature_c: float
    measured_at: str  # UTC, ISO 8601
    measured_unix_s: float
    window_s: float

    def age_s(self, now_unix_s: float) -> float:
        return max(now_unix_s - self.measured_unix_s, 0.0)


class IdleStore:
    """The stored baselines in ``directory``; ``now`` is the wall clock (s since the epoch)."""

    def __init__(
        self, directory: Path, now: Callable[[], float] = time.time, settings: str = ""
    ) -> None:
        self.path = Path(directory) / FILE_NAME
        self.now = now
        # the GPU settings the baselines were measured under (``gpu.*``: a locked clock draws
        # more at idle); "" for a GPU left as it was. Baselines of other settings are not used.
        self.settings = settings
        self.warnings: list[str] = []

    def _key(self, uuid: str) -> str:
        return uuid if not self.settings else f"{uuid} [{self.settings}]"

    def _read(self) -> dict[str, StoredIdle]:
        try:
            data = json.loads(self.path.read_text())
            gpus = data["gpus"] if data.get("format") == FORMAT else {}
            return {uuid: StoredIdle(**entry) for uuid, entry in gpus.items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            self.warnings.append(f"idle baseline cache {self.path} not readable ({exc}); ignored")
            return {}

    def lookup(self, uuids: Sequence[str]) -> dict[str, StoredIdle] | None:
        """The stored baselines of all of ``uuids`` (any age), or None when one has none."""
        stored = self._read()
        if not uuids or any(self._key(u) not in stored for u in uuids):
            return None
        return {u: stored[self._key(u)] for u in uuids}

    def remember(self, baseline: IdleBaseline, max_age_s: float) -> None:
        """Keep each device's part of a measured ``baseline`` where it is cooler than the stored
        one, or the stored one is older than ``max_age_s`` (or there is none)."""
        if baseline.power_w is None or baseline.measured_at is None:
            return
        stored, now = self._read(), self.now()
        changed = False
        for uuid, watts in baseline.per_device_w.items():
            temp = baseline.temperature_c.get(uuid)
            old = stored.get(self._key(uuid))
            if watts <= 0 or temp is None:
                continue  # not trustworthy: no temperature to judge it by
            if old is None or old.age_s(now) > max_age_s or temp <= old.temperature_c:
                bound = baseline.per_device_uncertainty_w.get(uuid)
                started = now - baseline.window_s  # remembered right after its window
                stored[self._key(uuid)] = StoredIdle(
                    watts, bound, temp, baseline.measured_at, started, baseline.window_s
                )
                changed = True
        if changed:
            self._write(stored)

    def _write(self, stored: Mapping[str, StoredIdle]) -> None:
        data = {"format": FORMAT, "gpus": {u: asdict(e) for u, e in stored.items()}}
        try:
            atomic_write_json(self.path, data)
        except OSError as exc:
            self.warnings.append(f"idle baseline cache {self.path} not writable ({exc})")


def cached_baseline(
    entries: Mapping[str, StoredIdle], now_unix_s: float, now_clock_s: float
) -> IdleBaseline:
    """An ``IdleBaseline`` (source ``cached``) from the stored baselines of the measured devices;
    its age is the oldest device's, and ``measured_clock_s`` that age before ``now_clock_s``."""
    age = max(e.age_s(now_unix_s) for e in entries.values())
    oldest = min(entries.values(), key=lambda e: e.measured_unix_s)
    bounds = [e.power_uncertainty_w for e in entries.values()]
    return IdleBaseline(
        power_w=sum(e.power_w for e in entries.values()),
        temperature_c={u: e.temperature_c for u, e in entries.items()},
        window_s=min(e.window_s for e in entries.values()),
        per_device_w={u: e.power_w for u, e in entries.items()},
        power_uncertainty_w=None if None in bounds else sum(b or 0.0 for b in bounds),
        per_device_uncertainty_w={
            u: e.power_uncertainty_w
            for u, e in entries.items()
            if e.power_uncertainty_w is not None
        },
        source=IdleSource.cached,
        measured_at=oldest.measured_at,
        measured_clock_s=now_clock_s - age,
        age_s=age,
    )


def hot_text(hot: Mapping[str, float], idle_c: Mapping[str, float]) -> str:
    return ", ".join(f"{u} at {t:.0f} C (idle {idle_c[u]:.0f} C)" for u, t in hot.items())


def stored_baseline(
    store: IdleStore,
    uuids: Sequence[str],
    cfg: MeasurementConfig,
    wait_until_cool: Callable[[Mapping[str, float], float], Mapping[str, float]],
    clock_now: Callable[[], float],
    warnings: list[str],
) -> IdleBaseline | None:
    """The stored baseline of ``uuids`` when it is younger than ``idle_cache_max_age_s``, after
    ``wait_until_cool(idle temperatures, margin)`` (which returns the devices still too hot);
    None (measure it) when there is none or it is too old. Warnings go to ``warnings``."""
    entries = store.lookup(uuids)
    if entries is None:
        return None
    idle_c = {u: e.temperature_c for u, e in entries.items()}
    still_hot = wait_until_cool(idle_c, float(cfg.idle_temp_margin_c))
    max_age = float(cfg.idle_cache_max_age_s)
    cached = cached_baseline(entries, store.now(), clock_now())
    waited = f" after waiting measurement.cooldown_s={cfg.cooldown_s} s"
    if (cached.age_s or 0.0) > max_age:
        if still_hot:
            warnings.append(
                f"idle baseline measured while {hot_text(still_hot, idle_c)}{waited} (the stored "
                f"one is older than measurement.idle_cache_max_age_s={max_age:g} s)"
            )
        return None
    if still_hot:
        warnings.append(
            f"idle baseline from {store.path} ({cached.age_s:.0f} s old) used while "
            f"{hot_text(still_hot, idle_c)}{waited}: a GPU hotter than its idle temperature is "
            "not measured as idle"
        )
    return cached

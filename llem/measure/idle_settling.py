"""How a measurement session settles its idle baseline (``llem.measure.idle``): reused from this
process, taken from llem's cache directory, or measured over ``measurement.idle_baseline_s``
before the model loads; a GPU source's, or without one the host's RAPL domains' alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from llem.config.schema import MeasurementConfig
from llem.measure.cooling import Cooling
from llem.measure.idle import (
    IdleBaseline,
    IdleCache,
    baseline_from_window,
    cpu_baseline_from_window,
)
from llem.measure.idle_store import IdleStore, hot_text, stored_baseline
from llem.measure.meter import WindowResult
from llem.measure.power_source import PowerSource
from llem.measure.sampler import Clock
from llem.measure.window import MeasurementWindow
from llem.result import utc_now

RAPL_KEY = ("rapl", ())  # the idle cache's key of a baseline of RAPL alone


class IdleSettling:
    """The idle-baseline part of ``MeasurementSession`` (which holds these attributes)."""

    cfg: MeasurementConfig
    source: PowerSource | None
    unavailable_reason: str | None
    measures_energy: bool
    clock: Clock
    setup_warnings: list[str]
    _idle_cache: IdleCache
    _idle_store: IdleStore | None
    _gpu_settings: str

    def _window(self, sync: Callable[[], None] | None, keep: bool) -> MeasurementWindow:
        raise NotImplementedError

    def _wait_until_cool(self, idle_c: Mapping[str, float], margin_c: float) -> Cooling:
        raise NotImplementedError

    def _idle_baseline(self) -> IdleBaseline:
        secs = float(self.cfg.idle_baseline_s or 0.0)
        if self.source is None:
            if self.measures_energy and secs > 0:  # RAPL alone: the CPU's idle power
                return self._rapl_idle(secs)
            return IdleBaseline(None, null_reason=f"energy unavailable: {self.unavailable_reason}")
        if secs <= 0:
            return IdleBaseline(None, null_reason="measurement.idle_baseline_s=0: not measured")
        key = (f"{self.source.kind} {self._gpu_settings}", tuple(self.source.uuids))
        cached = self._idle_cache.get(key)
        kept = self._stored_idle() if cached is None else self._kept(cached)
        if kept is not None:
            self._idle_cache.put(key, kept)
            return kept
        fresh = self._measure_idle(secs)
        if fresh.power_w is not None:
            self._idle_cache.put(key, fresh)
            if self._idle_store is not None and not self.source.kind.startswith("replay"):
                self._idle_store.remember(fresh, float(self.cfg.idle_cache_max_age_s))
                self._store_warnings()
        return fresh

    def _kept(self, cached: IdleBaseline) -> IdleBaseline | None:
        """This process's baseline, reused; None (measure again) once it is older than
        ``idle_max_age_s`` and the GPUs have cooled back to its temperature."""
        reused = cached.reused(self.clock.now())
        max_age = self.cfg.idle_max_age_s
        if max_age is None or (reused.age_s or 0.0) <= max_age:
            return reused
        margin = float(self.cfg.idle_temp_margin_c)
        cooling = self._wait_until_cool(cached.temperature_c, margin)
        if not cooling.still_hot:
            return None
        self.setup_warnings.append(
            f"idle baseline is {reused.age_s:.0f} s old (measurement.idle_max_age_s="
            f"{max_age}) but was not measured again: "
            + hot_text(cooling.still_hot, cached.temperature_c)
            + f" after waiting measurement.cooldown_s={self.cfg.cooldown_s} s for "
            f"idle + measurement.idle_temp_margin_c={margin}; the old baseline is used"
        )
        return reused

    def _stored_idle(self) -> IdleBaseline | None:
        """The GPUs' baseline from llem's cache directory, or None: measure (only NVML GPUs)."""
        if self._idle_store is None or self.source is None or self.source.kind.startswith("replay"):
            return None
        baseline = stored_baseline(
            self._idle_store,
            self.source.uuids,
            self.cfg,
            lambda idle_c, margin: self._wait_until_cool(idle_c, margin).still_hot,
            self.clock.now,
            self.setup_warnings,
        )
        self._store_warnings()
        return baseline

    def _store_warnings(self) -> None:
        if self._idle_store is not None:
            self.setup_warnings += self._idle_store.warnings
            self._idle_store.warnings.clear()

    def _measure_idle(self, secs: float) -> IdleBaseline:
        res, measured_at, clock_s = self._idle_window(secs)
        assert self.source is not None
        return baseline_from_window(res, self.source.uuids, measured_at, clock_s)

    def _rapl_idle(self, secs: float) -> IdleBaseline:
        """The CPU packages' and DRAM's idle power over ``secs`` of RAPL alone (no GPU source),
        measured once per process like a GPU's (not kept on disk)."""
        cached = self._idle_cache.get(RAPL_KEY)
        if cached is not None:
            return cached.reused(self.clock.now())
        no_gpu = f"energy unavailable: {self.unavailable_reason}"
        baseline = cpu_baseline_from_window(*self._idle_window(secs), no_gpu)
        self._idle_cache.put(RAPL_KEY, baseline)
        return baseline

    def _idle_window(self, secs: float) -> tuple[WindowResult, str, float]:
        """An idle window of ``secs``, when it began (UTC) and its start on the session clock."""
        measured_at, clock_s = utc_now(), self.clock.now()
        w = self._window(sync=None, keep=False)
        with w:
            self.clock.sleep(secs)
        assert w.result is not None
        return w.result, measured_at, clock_s

"""The measured window as a context manager: edges, sampler thread, cleanup.

The window knows only its parts (meter, clock, sample rate, a sync function and where to hand its
result), not the session that builds it: ``llem.measure.session`` imports this module, never the
reverse.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, Literal

from llem.measure.chassis import ChassisMeter
from llem.measure.meter import EnergyMeter, WindowResult
from llem.measure.sampler import Clock, Sampler

log = logging.getLogger(__name__)


class MeasurementWindow:
    """``with session.window() as w:`` measures the block.

    On entry: ``sync()`` (CUDA, when the session is on CUDA), then the start edge (counters, whose
    read instant is the window start, then one sample), then the sampler thread starts. On exit,
    exceptions included: ``sync()``, the sampler is stopped and joined, then the end edge (one
    sample, then the counters, whose read instant is the window end). NVML failures inside never
    raise out of the window (see ``llem.measure.meter``).

    ``start_s``/``end_s`` are seconds since ``origin_s`` (the session start: the replay trace's
    time). ``on_end`` receives the result once the window has ended. ``chassis`` (the BMC's
    readings, ``llem.measure.chassis``) begins after the start edge and ends after the end edge;
    its energy is the result's ``chassis``.
    """

    def __init__(
        self,
        meter: EnergyMeter,
        clock: Clock,
        sample_hz: float,
        origin_s: float,
        sync: Callable[[], None] | None = None,
        on_end: Callable[[WindowResult], None] | None = None,
        chassis: ChassisMeter | None = None,
    ) -> None:
        self._meter = meter
        self._chassis = chassis
        self._clock = clock
        self._sampler = Sampler(meter.tick, sample_hz, clock)
        self._origin_s = origin_s
        self._sync = sync
        self._on_end = on_end
        self._t0: float | None = None
        self.result: WindowResult | None = None
        self.start_s: float | None = None
        self.end_s: float | None = None
        self.started_utc: datetime | None = None  # the start edge on the wall clock

    def __enter__(self) -> MeasurementWindow:
        if self._t0 is not None:
            raise RuntimeError("a measurement window can only be entered once")
        if self._sync is not None:
            self._sync()
        start = self._meter.begin()
        self._t0 = start
        self.start_s = start - self._origin_s
        self.started_utc = datetime.now(timezone.utc)
        if self._chassis is not None:
            self._chassis.begin(start)
        self._sampler.start(start)
        return self

    def elapsed_s(self) -> float:
        """Seconds since the window started (its final length once it has ended)."""
        if self.result is not None:
            return self.result.window_s
        if self._t0 is None:
            return 0.0
        return self._clock.now() - self._t0

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        sync_error: BaseException | None = None
        if self._sync is not None:
            try:
                self._sync()
            except Exception as err:  # re-raised below unless the block already failed
                sync_error = err
        try:
            self._sampler.stop()
        finally:
            self.result = self._meter.end(self._sampler.error)
            self.result = dataclasses.replace(self.result, started_utc=self.started_utc)
            if self._chassis is not None:
                wall = self._chassis.end(self.result.end_s)
                self.result = dataclasses.replace(self.result, chassis=wall)
            self.end_s = self.result.end_s - self._origin_s
            if self._on_end is not None:
                self._on_end(self.result)
        if sync_error is not None:
            if exc_type is None:
                raise sync_error
            log.warning("CUDA synchronize failed at the window end: %s", sync_error)
        return False

"""The measured window as a context manager: edges, sampler thread, cleanup."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal, Optional

from llem.measure.energy import EnergyMeter, WindowResult
from llem.measure.sampler import Sampler

if TYPE_CHECKING:
    from llem.measure.session import MeasurementSession

log = logging.getLogger(__name__)


class MeasurementWindow:
    """``with session.window() as w:`` measures the block.

    On entry: CUDA sync (when the session is on CUDA), counters and one sample read at the start
    edge, then the sampler thread starts. On exit, exceptions included: CUDA sync, the end time is
    taken, the sampler is stopped and joined, and one more sample and the counters are read at the
    end edge. NVML failures inside never raise out of the window (see ``llem.measure.energy``).

    ``start_s``/``end_s`` are seconds since ``session.start()`` (the replay trace's time).
    """

    def __init__(self, session: MeasurementSession, sync: bool, keep: bool) -> None:
        self._session = session
        self._sync = sync
        self._keep = keep
        self._clock = session.clock
        self._meter = EnergyMeter(session.source, session.rapl())
        self._sampler = Sampler(self._meter.tick, float(session.cfg.sample_hz), self._clock)
        self._t0: Optional[float] = None
        self.result: Optional[WindowResult] = None
        self.start_s: Optional[float] = None
        self.end_s: Optional[float] = None

    def __enter__(self) -> MeasurementWindow:
        if self._t0 is not None:
            raise RuntimeError("a measurement window can only be entered once")
        if self._sync:
            self._session.cuda_sync()
        now = self._clock.now()
        self._t0 = now
        self.start_s = now - (self._session.origin_s or 0.0)
        self._meter.begin(now)
        self._sampler.start(now)
        return self

    def elapsed_s(self) -> float:
        """Seconds since the window started (its final length once it has ended)."""
        if self.result is not None:
            return self.result.window_s
        if self._t0 is None:
            return 0.0
        return self._clock.now() - self._t0

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        sync_error: Optional[BaseException] = None
        if self._sync:
            try:
                self._session.cuda_sync()
            except Exception as err:  # re-raised below unless the block already failed
                sync_error = err
        end = self._clock.now()
        try:
            self._sampler.stop()
        finally:
            self.result = self._meter.end(end, self._sampler.error)
            self.end_s = end - (self._session.origin_s or 0.0)
            if self._keep:
                self._session.last_window = self.result
        if sync_error is not None:
            if exc_type is None:
                raise sync_error
            log.warning("CUDA synchronize failed at the window end: %s", sync_error)
        return False

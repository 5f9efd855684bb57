"""The sampler thread and the clock it runs on (the sample it records is
``llem.devices.readings.Sample``).

The sampler calls one ``tick(now)`` function at a fixed rate (``measurement.sample_hz``) on a daemon
thread until it is stopped. Ticks are scheduled on a fixed grid ``start + k / hz`` so they do not
drift; a tick that overruns skips the missed grid points instead of bursting.

Time comes from a ``Clock``. ``RealClock`` is ``time.perf_counter`` (seconds, monotonic); tests pass
a virtual clock with the same three methods so a 3 s window runs in milliseconds and every sample is
taken at a known instant.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic clock (arbitrary origin)."""

    def sleep(self, seconds: float) -> None:
        """Block the calling (main) thread for ``seconds``."""

    def wait_until(self, deadline: float, stop: threading.Event) -> bool:
        """Block the sampler thread until ``now() >= deadline`` or ``stop`` is set.

        Returns False when stopped.
        """


class RealClock:
    """Wall time from ``time.perf_counter`` (seconds)."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait_until(self, deadline: float, stop: threading.Event) -> bool:
        remaining = deadline - self.now()
        if remaining > 0:
            stop.wait(remaining)
        return not stop.is_set()


class Sampler:
    """Calls ``tick(now)`` every ``1 / hz`` seconds on a daemon thread between start() and stop().

    ``tick`` must not raise for expected failures (it records them itself); anything it does raise
    stops the sampler, is logged, and is kept in ``error`` so the window can report it.
    """

    def __init__(self, tick: Callable[[float], None], hz: float, clock: Clock) -> None:
        if hz <= 0:
            raise ValueError(f"sample rate must be > 0 Hz, got {hz}")
        self._tick = tick
        self._period_s = 1.0 / hz
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.ticks = 0

    def start(self, start_time: float) -> None:
        """Start ticking at ``start_time + 1/hz``, ``start_time + 2/hz``, ..."""
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._stop.clear()
        hook = getattr(self._clock, "thread_starting", None)
        if hook is not None:
            hook()
        self._thread = threading.Thread(
            target=self._run, args=(start_time,), name="llem-sampler", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop and join the thread. Idempotent; safe to call from a ``finally``."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self, start_time: float) -> None:
        try:
            deadline = start_time + self._period_s
            while self._clock.wait_until(deadline, self._stop):
                now = self._clock.now()
                self._tick(now)
                self.ticks += 1
                deadline += self._period_s
                if deadline <= self._clock.now():  # overran: skip missed grid points
                    late = self._clock.now() - deadline
                    deadline += (int(late / self._period_s) + 1) * self._period_s
        except BaseException as exc:  # a sampler must never die silently
            self.error = exc
            log.warning("power sampler stopped: %s: %s", type(exc).__name__, exc)
        finally:
            hook = getattr(self._clock, "thread_finished", None)
            if hook is not None:
                hook()

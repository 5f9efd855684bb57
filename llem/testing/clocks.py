"""A deterministic virtual clock for the sampler thread (tests only).

The main thread moves time with ``sleep(dt)``. A sampler thread parked in ``wait_until(deadline)``
is woken at each of its deadlines in turn, and ``sleep`` waits until it has taken its sample and
parked again before moving on. So a 3 s window at 50 Hz runs in milliseconds and every sample is
taken exactly at its scheduled virtual instant.
"""

from __future__ import annotations

import threading
import time


class SteppingClock:
    def __init__(self, start: float = 1000.0, real_timeout_s: float = 10.0) -> None:
        self._t = start
        self._cv = threading.Condition()
        self._state: str | None = None  # sampler: None (absent) | "busy" | "parked"
        self._pending: float | None = None
        self._timeout = real_timeout_s

    def now(self) -> float:
        with self._cv:
            return self._t

    def thread_starting(self) -> None:
        with self._cv:
            self._state = "busy"

    def thread_finished(self) -> None:
        with self._cv:
            self._state, self._pending = None, None
            self._cv.notify_all()

    def wait_until(self, deadline: float, stop: threading.Event) -> bool:
        with self._cv:
            self._state, self._pending = "parked", deadline
            self._cv.notify_all()
            while self._t < deadline and not stop.is_set():
                self._cv.wait(0.005)
            self._pending = None
            if stop.is_set():
                self._state = None
                self._cv.notify_all()
                return False
            self._state = "busy"
            return True

    def sleep(self, seconds: float) -> None:
        with self._cv:
            target = self._t + max(seconds, 0.0)
            while True:
                # the real time allowed is per sample: a sleep over many samples on a busy
                # machine takes as long as they take, each within the timeout
                give_up = time.monotonic() + self._timeout
                while self._state == "busy":
                    if time.monotonic() > give_up:
                        raise RuntimeError("sampler thread never parked")
                    self._cv.wait(0.05)
                pending = self._pending
                if self._state == "parked" and pending is not None and pending <= target:
                    self._t = max(self._t, pending)
                    self._state = "busy"
                    self._cv.notify_all()
                    continue
                self._t = target
                return

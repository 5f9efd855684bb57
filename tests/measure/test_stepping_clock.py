"""The virtual clock of the sampler tests (llem.testing.clocks): its real-time limit is on each
sample, never on a whole sleep, so a window of many samples on a busy machine still runs."""

from __future__ import annotations

import threading
import time

import pytest

from llem.testing.clocks import SteppingClock


def _sampler(
    clock: SteppingClock, every: float, work_s: float, stop: threading.Event
) -> list[float]:
    taken: list[float] = []

    def loop() -> None:
        clock.thread_starting()
        deadline = clock.now() + every
        while clock.wait_until(deadline, stop):
            time.sleep(work_s)  # a sample that takes real time (a busy machine)
            taken.append(clock.now())
            deadline += every
        clock.thread_finished()

    threading.Thread(target=loop, daemon=True).start()
    return taken


def test_a_sleep_over_many_slow_samples_takes_them_all() -> None:
    """10 samples of 30 ms real time each in one sleep: 0.3 s in all, over a 0.2 s limit that
    each sample is well within."""
    clock = SteppingClock(start=0.0, real_timeout_s=0.2)
    stop = threading.Event()
    taken = _sampler(clock, 0.1, 0.03, stop)
    clock.sleep(1.0)
    stop.set()
    assert taken == pytest.approx([0.1 * k for k in range(1, 11)])


def test_a_sampler_that_never_parks_again_is_an_error() -> None:
    clock = SteppingClock(start=0.0, real_timeout_s=0.2)
    stop = threading.Event()
    _sampler(clock, 0.1, 0.5, stop)  # one sample takes longer than the limit
    with pytest.raises(RuntimeError, match="never parked"):
        clock.sleep(1.0)
    stop.set()

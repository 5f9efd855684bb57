"""``llem.testing.proctree.thread_times``: a thread's CPU seconds and its name, read from /proc,
the figures the tracking test and bench read beside a measured window."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from llem.testing.proctree import thread_times

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _spin(seconds: float, done: threading.Event) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    done.wait()


def test_a_busy_thread_has_its_cpu_seconds_and_an_idle_one_none() -> None:
    done = threading.Event()
    busy = threading.Thread(target=_spin, args=(0.2, done), name="busy")
    idle = threading.Thread(target=done.wait, name="idle")
    busy.start()
    idle.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            times = thread_times(os.getpid())
            if busy.native_id in times and times[busy.native_id].cpu_s >= 0.15:
                break
            time.sleep(0.05)
    finally:
        done.set()
        busy.join()
        idle.join()
    assert times[busy.native_id].cpu_s >= 0.15
    assert times[idle.native_id].cpu_s <= 0.01
    assert times[busy.native_id].name == times[threading.get_native_id()].name  # the process's
    # ended: no longer listed, once the OS has let it go (join returns a moment before)
    deadline = time.monotonic() + 10
    while busy.native_id in thread_times(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert busy.native_id not in thread_times(os.getpid())

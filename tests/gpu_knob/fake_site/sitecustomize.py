"""Puts the NVML test double in place of pynvml in a llem subprocess (tests/gpu_knob only).

On ``PYTHONPATH`` with ``LLEM_TEST_FAKE_NVML_STATE=<file>`` set, every Python process started
there sees one fake GPU whose settings live in that file (read at start, written on each change),
so a test can look at the GPU after the process is gone. ``LLEM_TEST_FAKE_NVML_CONTROL`` holds
``FakeControl`` options as JSON. With ``LLEM_TEST_WINDOW_MARKER=<file>``, the measured window writes
that file when it opens and then waits ``LLEM_TEST_WINDOW_WAIT_S`` seconds (a long generation), so
the test can signal the process mid-window.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path


class _Clock:
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _install_nvml(state: str) -> None:
    from llem.testing.fake_nvml_control import FakeControl, load_state
    from llem.testing.fake_pynvml import FakeGpu, FakeNvml

    options = json.loads(os.environ.get("LLEM_TEST_FAKE_NVML_CONTROL", "{}"))
    gpu = FakeGpu("GPU-fake-0000", control=FakeControl(state_file=Path(state), **options))
    load_state(gpu, Path(state))
    sys.modules["pynvml"] = FakeNvml([gpu], _Clock())


def _hold_the_window(marker: str, wait_s: float) -> None:
    from llem.measure.session import MeasurementSession

    opened = MeasurementSession.window

    @contextlib.contextmanager
    def window(self):  # type: ignore[no-untyped-def]
        with opened(self) as w:
            Path(marker).write_text("open", encoding="utf-8")
            time.sleep(wait_s)
            yield w

    MeasurementSession.window = window  # type: ignore[method-assign, assignment]


if os.environ.get("LLEM_TEST_FAKE_NVML_STATE"):
    _install_nvml(os.environ["LLEM_TEST_FAKE_NVML_STATE"])
if os.environ.get("LLEM_TEST_WINDOW_MARKER"):
    _hold_the_window(
        os.environ["LLEM_TEST_WINDOW_MARKER"],
        float(os.environ.get("LLEM_TEST_WINDOW_WAIT_S", "60")),
    )

"""Nothing of llem's own runs beside a sweep point's measured window.

A real in-process sweep on the tiny model, with the end-of-sweep report on, with and without the
live display: at each measured window's edges the test reads the CPU time of every process this
one started (the report worker) and the Python threads alive, and asserts none of them used CPU
or appeared while the window was open (the sampler's thread, which single runs have too, aside).
The report worker is made slow to start (a planted ``sitecustomize`` spins on the CPU in the
worker alone, until the first window has closed or 6 s have passed), as it is on a busy machine
where its imports of pandas and matplotlib outlast the sweep's first model load.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from llem.app.entrypoint import main
from llem.measure.window import MeasurementWindow
from llem.testing.proctree import descendants_cpu_s

from .conftest import result

# Runs in every Python process started with the test's PYTHONPATH; spins only in the worker.
_SLOW_WORKER = """
import sys, time, pathlib
if sys.orig_argv[-2:] == ["-m", "llem.report.worker"]:
    _stop, _t0 = pathlib.Path({stop!r}), time.monotonic()
    while not _stop.exists() and time.monotonic() - _t0 < 6.0:
        pass
"""

# A window of a few tenths of a second: many CPU clock ticks (10 ms) of anything beside it.
POINT = ["decoder.max_new_tokens=16", "dataset.n_prompts=4", "measurement.warmup=0"]


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() rewrites sys.argv


def _watch_windows(monkeypatch: pytest.MonkeyPatch, stop: Path) -> list[dict[str, Any]]:
    """Each measured window's view of this process's children and threads, at its edges."""
    windows: list[dict[str, Any]] = []
    enter, exit_ = MeasurementWindow.__enter__, MeasurementWindow.__exit__

    def watched_enter(self: MeasurementWindow) -> MeasurementWindow:
        windows.append(
            {"cpu_open": descendants_cpu_s(os.getpid()), "threads": set(threading.enumerate())}
        )
        return enter(self)

    def watched_exit(self: MeasurementWindow, *exc: Any) -> Any:
        try:
            return exit_(self, *exc)
        finally:
            windows[-1]["cpu_closed"] = descendants_cpu_s(os.getpid())
            windows[-1]["threads_closed"] = set(threading.enumerate())
            stop.touch()

    monkeypatch.setattr(MeasurementWindow, "__enter__", watched_enter)
    monkeypatch.setattr(MeasurementWindow, "__exit__", watched_exit)
    return windows


@pytest.mark.parametrize("progress", ["plain", "live"])
@pytest.mark.slow
def test_no_process_or_thread_of_llems_runs_beside_a_measured_window(
    progress: str, tiny: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    stop = tmp_path / "first-window-closed"
    (site / "sitecustomize.py").write_text(_SLOW_WORKER.format(stop=str(stop)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    windows = _watch_windows(monkeypatch, stop)
    threads_before = set(threading.enumerate())
    sweep_dir = tmp_path / "sweep"

    code = main(
        [
            "--multirun",
            *tiny,
            *POINT,
            f"hydra.sweep.dir={sweep_dir}",
            f"hydra.sweeper.progress={progress}",  # live: the display a terminal gets
            "repeat=range(3)",
        ]
    )

    assert code == 0
    assert [result(sweep_dir, i)["status"] for i in range(3)] == ["ok"] * 3
    assert (sweep_dir / "summary.csv").is_file()  # the report was still built
    assert len(windows) == 3
    assert all(w["cpu_open"] for w in windows)  # the report worker was there, beside each window
    for k, w in enumerate(windows):
        opened, closed = w["cpu_open"], w["cpu_closed"]
        assert opened.keys() == closed.keys(), f"window {k}: a process started or ended in it"
        used = {pid: round(closed[pid] - opened[pid], 3) for pid in opened}
        assert not any(used.values()), f"window {k}: CPU seconds used beside it: {used}"
        new_threads = (w["threads"] | w["threads_closed"]) - threads_before
        assert {t.name for t in new_threads} <= {"llem-sampler"}, f"window {k}: {new_threads}"

"""Nothing of the tracker runs once a point's logging returns: the next point's window starts
then, and would share the CPU with it (issue 44). A planted point logged by the tracker itself
(its metrics, parameters, tags, timeline history and files) to a real MLflow server, then the CPU
seconds, in the second after the call returns, that this process used beyond the threads it had
before the logging, and that the server's processes used. CPU seconds, not wall-clock ones: they
hold on a busy machine.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from llem.testing.proctree import cpu_s, descendants_cpu_s, thread_times

from .wandb_files import plant_point_files, plant_sweep

pytestmark = [pytest.mark.mlflow, pytest.mark.slow]  # a real server: its start takes seconds

QUIET_S = 1.0  # how long after the logging returns the CPU is read: a short window's length
# Threads the logging left may use two clock ticks of it (20 ms: CPU time is counted in 10 ms
# ticks; an idle thread uses none; a history logged in the background after the call, 0.06 s)
THREAD_CPU_S = 0.02
# The server, idle, polls its job queue: about 5 ms of CPU a second (2026-11-29); work left over
# from the logging (a write finished after the answer, a job) would be above this
SERVER_CPU_S = 0.05


def _server_cpu_s(pid: int) -> float:
    return (cpu_s(pid) or 0.0) + sum(descendants_cpu_s(pid).values())


def _settle(pid: int, limit_s: float = 300.0) -> None:
    """Wait until the server uses no more than its idle polling: it answers /health while still
    starting its workers and job runner (about 30 CPU-seconds here, 2026-11-29)."""
    deadline = time.monotonic() + limit_s
    last = _server_cpu_s(pid)
    while time.monotonic() < deadline:
        time.sleep(QUIET_S)
        now = _server_cpu_s(pid)
        if now - last <= SERVER_CPU_S / 2:
            return
        last = now
    pytest.fail(f"the MLflow server still busy {limit_s:.0f} s after it answered /health")


def _log_a_point(uri: str, sweep: Path, experiment: str) -> None:
    from llem.tracking.upload import MlflowTracker

    assert MlflowTracker(uri, experiment, 30).log_point(sweep, sweep / "0")


def test_nothing_of_the_tracker_runs_after_a_point_is_logged(
    mlflow_server: dict[str, Any], tmp_path: Path
) -> None:
    sweep = tmp_path / "sweep"
    plant_sweep(sweep, [1])
    plant_point_files(sweep / "0")
    _settle(mlflow_server["pid"])
    me = os.getpid()
    before = thread_times(me)  # mlflow perhaps not imported yet: its threads count too
    _log_a_point(mlflow_server["uri"], sweep, tmp_path.name)
    returned, mine = thread_times(me), cpu_s(me) or 0.0
    server = _server_cpu_s(mlflow_server["pid"])
    time.sleep(QUIET_S)
    later, mine = thread_times(me), (cpu_s(me) or 0.0) - mine
    server = _server_cpu_s(mlflow_server["pid"]) - server

    # this process's CPU but that of the threads it had before: a thread the logging started
    # counts even where it ended within the second (the process keeps its CPU time)
    had = sum(later[t].cpu_s - returned[t].cpu_s for t in before if t in later and t in returned)
    left = sorted(f"{later[t].name} ({t})" for t in later if t not in before)
    assert mine - had <= THREAD_CPU_S, f"{mine - had:.2f} CPU-s; threads left: {left}"
    assert server <= SERVER_CPU_S

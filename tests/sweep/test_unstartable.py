"""A SLURM job that can never start fails its point with the scheduler's reason, in bounded time,
and the progress says why points are pending. squeue and sinfo answers are scripted."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

import llem.sweep.launch
from llem.app.entrypoint import main
from llem.result import RunResult
from llem.sweep.collect import collect
from llem.sweep.display import LiveSweepDisplay
from llem.sweep.plan import Point
from llem.sweep.progress import SweepProgress
from llem.sweep.squeue import parse_squeue
from llem.sweep.unstartable import Node, NodeRequest, gpus_of, memory_mb, parse_sinfo
from llem.sweep.watchdog import JobInfo, SlurmWatchdog

from .conftest import FAST, NO_REPORT
from .test_watchdog import Clock, Scheduler, submit

# What squeue -o '%i|%A|%T|%r|%N|%M|%l|%P|%C|%m|%b' prints for a pending job.
PENDING = "42_{t}|9{t}|PENDING|{reason}||0:00|2:00:00|gpu|{cpus}|64G|gres/gpu:{gpus}"
NODES = [Node(cpus=32, memory_mb=512 * 1024, gpus=4)] * 2  # the gpu partition (sinfo)


def pending(task: int, reason: str, cpus: int = 8, gpus: int = 1) -> JobInfo:
    line = PENDING.format(t=task, reason=reason, cpus=cpus, gpus=gpus)
    return parse_squeue(line)[f"42_{task}"]


def watchdog(tmp_path: Path, sched: Scheduler, clock: Clock, seen: list) -> SlurmWatchdog:
    asked: list[str] = []

    def capacity(partition: str) -> list[Node] | None:
        asked.append(partition)
        return NODES if partition == "gpu" else None

    w = SlurmWatchdog(
        str(tmp_path / ".submitit" / "*"),
        points=[3, 5],
        settled_by_result=lambda i: False,
        query=sched.query,
        cancel=sched.cancel,
        clock=clock,
        unstartable_s=60,
        capacity=capacity,
        on_pending=seen.append,
    )
    w.asked = asked  # type: ignore[attr-defined]
    return w


def test_a_job_pending_with_partitionconfig_fails_its_point_after_the_bound(
    tmp_path: Path,
) -> None:
    sched, clock, seen = Scheduler(), Clock(), []
    w = watchdog(tmp_path, sched, clock, seen)
    submit(tmp_path / ".submitit", "42_0")
    submit(tmp_path / ".submitit", "42_1")
    sched.states = {"42_0": pending(0, "PartitionConfig"), "42_1": pending(1, "Priority")}
    for t in (0, 30, 59):
        clock.t = t
        w.poll()
    assert not w.lost and not sched.cancelled  # within the bound: the reason may pass
    assert seen[-1] == {3: "PartitionConfig", 5: "Priority"}
    clock.t = 61
    w.poll()
    assert sched.cancelled == ["42_0"] and list(w.lost) == [3]
    assert w.lost[3].message == (
        "SLURM job 42_0 can never start: pending with reason PartitionConfig (the request does "
        "not fit the partition's configuration); llem cancelled it"
    )
    assert seen[-1] == {5: "Priority"}  # a job waiting its turn waits on
    clock.t = 10_000
    w.poll()
    assert list(w.lost) == [3]

    status, error = collect(
        Point(index=3, overrides=["x=1"]), None, None, tmp_path / "3", None, w.lost[3]
    )
    record = RunResult.read(tmp_path / "3")
    assert status == "failed" and error is not None and "PartitionConfig" in error
    assert record is not None and record.error is not None
    assert "cpus_per_task" in record.error.hint and "partition" in record.error.hint


def test_resources_no_node_of_the_partition_has_is_never_going_to_start(tmp_path: Path) -> None:
    sched, clock, seen = Scheduler(), Clock(), []
    w = watchdog(tmp_path, sched, clock, seen)
    submit(tmp_path / ".submitit", "42_0")
    submit(tmp_path / ".submitit", "42_1")
    sched.states = {
        "42_0": pending(0, "Resources", cpus=8, gpus=8),  # the nodes have 4 GPUs
        "42_1": pending(1, "Resources", cpus=8, gpus=4),  # fits: waits for busy nodes
    }
    for t in (0, 61, 5_000):
        clock.t = t
        w.poll()
    assert list(w.lost) == [3] and sched.cancelled == ["42_0"]
    assert w.lost[3].message == (
        "SLURM job 42_0 can never start: pending with reason Resources: it asks for 8 CPUs, "
        "64 GB and 8 GPUs on one node, more than any node of partition gpu has; llem cancelled it"
    )
    assert w.asked == ["gpu"]  # type: ignore[attr-defined]  # sinfo asked once per partition


def test_nothing_is_concluded_when_sinfo_gives_no_answer(tmp_path: Path) -> None:
    sched, clock, seen = Scheduler(), Clock(), []
    w = watchdog(tmp_path, sched, clock, seen)
    submit(tmp_path / ".submitit", "42_0")
    info = pending(0, "ReqNodeNotAvail, UnavailableNodes:n[1-2]", gpus=8)
    info.request = NodeRequest("other", 8, None, 8)  # a partition sinfo does not answer for
    sched.states = {"42_0": info}
    for t in (0, 100, 10_000):
        clock.t = t
        w.poll()
    assert not w.lost


def test_squeue_and_sinfo_fields_parse() -> None:
    req = pending(0, "Resources", cpus=16, gpus=2).request
    assert req == NodeRequest("gpu", 16, 64 * 1024, 2)
    assert gpus_of("gres:gpu:a100:2(S:0-1),shard:8") == 2 and gpus_of("N/A") == 0
    assert (
        memory_mb("16000M") == 16000 and memory_mb("1T") == 1024 * 1024 and memory_mb("?") is None
    )
    nodes = parse_sinfo("n1|64|256000|gpu:h100:4(S:0-1)\nn2|32+|128000|(null)\n")
    assert nodes == [Node(64, 256000, 4), Node(32, 128000, 0)]
    assert parse_sinfo("garbage") is None


def test_the_progress_says_why_points_are_pending(caplog: pytest.LogCaptureFixture) -> None:
    p = SweepProgress(3)
    with caplog.at_level(logging.INFO, logger="llem.sweep"):
        p.pending({0: "Resources", 1: "PartitionConfig", 2: "Resources"})
        p.pending({0: "Resources", 1: "PartitionConfig", 2: "Resources"})  # unchanged: no line
    assert [r.getMessage() for r in caplog.records] == [
        "waiting: 3 pending in the queue: Resources ×2, PartitionConfig ×1"
    ]
    from rich.console import Console

    console = Console(file=io.StringIO(), width=140, color_system=None)
    console.print(LiveSweepDisplay(p))
    assert "waiting: 3 pending in the queue: Resources ×2, PartitionConfig ×1" in (
        console.file.getvalue()  # type: ignore[attr-defined]
    )
    p.pending({})
    assert p.waiting == ""


def test_the_bound_is_a_sweeper_setting(
    tiny: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    seen: list[dict[str, Any]] = []
    real = llem.sweep.launch.watch

    def watch(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(llem.sweep.launch, "watch", watch)
    args = ["--multirun", *tiny, *FAST, NO_REPORT, f"hydra.sweep.dir={tmp_path / 's'}"]
    assert main([*args, "hydra.sweeper.unstartable_s=600"]) == 0
    assert seen[0]["unstartable_s"] == 600.0
    assert callable(seen[0]["on_pending"])

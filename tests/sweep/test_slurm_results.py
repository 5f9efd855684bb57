"""A SLURM job's result that shows up late (NFS) is waited for, and never replaced by a record."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import llem.sweep.collect
import llem.sweep.launch
from llem.app.entrypoint import main
from llem.result import RunResult
from llem.sweep.collect import collect
from llem.sweep.plan import Point
from llem.sweep.watchdog import Lost, SlurmWatchdog

from .conftest import FAST, NO_REPORT
from .test_watchdog import Clock, Scheduler, info, submit


def test_a_result_that_shows_up_40_s_after_its_job_ended_is_waited_for(tmp_path: Path) -> None:
    """The default grace covers a result that takes up to a minute to be visible (NFS)."""
    sched, clock, results = Scheduler(), Clock(), set()
    w = SlurmWatchdog(
        str(tmp_path / ".submitit" / "*"),
        points=[3],
        settled_by_result=lambda i: i in results,
        query=sched.query,
        cancel=sched.cancel,
        clock=clock,
    )
    submit(tmp_path / ".submitit", "42")
    sched.states = {"42": info("42", "COMPLETED")}
    for t in (0, 20, 40):
        clock.t = t
        w.poll()
    assert not w.lost  # 15 s of grace lost it at 20 s
    results.add(3)  # now visible on the submit node
    clock.t = 70
    w.poll()
    assert not w.lost and w.settled(3)


@pytest.mark.slow
def test_the_grace_is_a_sweeper_setting(
    tiny: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    seen: list[float] = []
    real = llem.sweep.launch.watch

    def watch(*args: Any, grace_s: float, **kwargs: Any) -> Any:
        seen.append(grace_s)
        return real(*args, grace_s=grace_s, **kwargs)

    monkeypatch.setattr(llem.sweep.launch, "watch", watch)
    args = ["--multirun", *tiny, *FAST, NO_REPORT, f"hydra.sweep.dir={tmp_path / 's'}"]
    assert main([*args, "hydra.sweeper.result_grace_s=90"]) == 0
    assert seen == [90.0]
    assert main([*args, "hydra.sweeper.result_grace_s=-1", "hydra.sweep.dir=x"]) == 2


def test_a_lost_job_record_never_replaces_a_result_that_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The job's ok result reaches the file server while the submit node still sees no file:
    the lost-job record is not written over it, and the point counts as ok."""
    point = Point(index=2, overrides=["x=1"], config_hash="h")
    point_dir = tmp_path / "2"
    RunResult(status="ok", config_hash="h").write(point_dir)
    monkeypatch.setattr(llem.sweep.collect, "fingerprint", lambda path: None)  # not visible yet
    lost = Lost(job_id="42", message="SLURM job 42 left the queue without writing a result")
    with caplog.at_level("WARNING", logger="llem.sweep"):
        status, error = collect(point, None, None, point_dir, None, lost)
    assert (status, error) == ("ok", None)
    # the lost-job path was taken (the result was invisible), and its write found the file
    assert "appeared after its job was declared lost" in caplog.text
    on_disk = RunResult.read(point_dir)
    assert on_disk is not None and on_disk.status == "ok"


def test_a_lost_job_without_a_result_gets_its_record(tmp_path: Path) -> None:
    point = Point(index=2, overrides=["x=1"], config_hash="h")
    lost = Lost(job_id="42", message="SLURM job 42 ended CANCELLED without writing a result")
    status, error = collect(point, None, None, tmp_path / "2", None, lost)
    assert status == "failed" and error is not None and "CANCELLED" in error
    record = RunResult.read(tmp_path / "2")
    assert record is not None and record.error is not None
    assert record.error.type == "SlurmJobLost"


def test_a_record_is_written_where_hard_links_are_not_supported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    def no_links(src: object, dst: object) -> None:
        raise PermissionError("hard links are not supported here")

    monkeypatch.setattr(os, "link", no_links)
    RunResult(status="failed").write(tmp_path / "a", replace=False)
    assert RunResult.read(tmp_path / "a") is not None
    with pytest.raises(FileExistsError):
        RunResult(status="failed").write(tmp_path / "a", replace=False)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["result.json"]

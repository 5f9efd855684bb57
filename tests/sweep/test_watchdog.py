"""The SLURM watchdog without a cluster: squeue answers are scripted, time is a fake clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from llem.sweep.squeue import parse_squeue, slurm_seconds
from llem.sweep.watchdog import JobInfo, SlurmWatchdog


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def submit(folder: Path, job_id: str) -> Path:
    """What submitit leaves once sbatch accepted a job: its folder and submitted pickle."""
    d = folder / job_id
    d.mkdir(parents=True)
    (d / f"{job_id}_submitted.pkl").write_bytes(b"x")
    return d


def info(job_id: str, state: str, reason: str = "None", elapsed: str = "0:05") -> JobInfo:
    return parse_squeue(f"{job_id}|9{job_id[-1]}|{state}|{reason}|node7|{elapsed}|10:00")[job_id]


class Scheduler:
    """A scripted squeue: ``states[job] = JobInfo`` (absent: not listed); None: squeue failed."""

    def __init__(self) -> None:
        self.states: dict[str, JobInfo] | None = {}
        self.cancelled: list[str] = []

    def query(self, arrays: Sequence[str]) -> dict[str, JobInfo] | None:
        return None if self.states is None else dict(self.states)

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


def watchdog(tmp_path: Path, results: set, sched: Scheduler, clock: Clock) -> SlurmWatchdog:
    return SlurmWatchdog(
        str(tmp_path / ".submitit" / "*"),
        points=[3, 5],  # grid indices of array tasks 0 and 1
        settled_by_result=lambda i: i in results,
        grace_s=10,
        poll_s=0.01,
        overrun_s=60,
        query=sched.query,
        cancel=sched.cancel,
        clock=clock,
    )


def test_a_job_that_left_the_queue_without_a_result_is_lost_after_the_grace(
    tmp_path: Path,
) -> None:
    sched, clock, results = Scheduler(), Clock(), set()
    submit(tmp_path / ".submitit", "41_0")  # an older sweep's job: not this launch's
    w = watchdog(tmp_path, results, sched, clock)
    submit(tmp_path / ".submitit", "42_0")
    submit(tmp_path / ".submitit", "42_1")
    sched.states = {"42_0": info("42_0", "RUNNING"), "42_1": info("42_1", "RUNNING")}
    w.poll()
    assert {i: j for i, (j, _) in w.jobs.items()} == {3: "42_0", 5: "42_1"}
    assert not w.lost

    sched.states = {"42_0": info("42_0", "COMPLETED"), "42_1": info("42_1", "CANCELLED")}
    results.add(3)  # point 3 wrote its result.json before its job ended
    w.poll()
    clock.t = 9
    w.poll()
    assert not w.lost  # still within the grace for a result to show up
    clock.t = 11
    w.poll()
    assert list(w.lost) == [5]
    lost = w.lost[5]
    assert lost.message == "SLURM job 42_1 on node7 ended CANCELLED without writing a result"
    assert (lost.slurm_job_id, lost.node) == ("91", "node7")
    assert lost.log_dir == tmp_path / ".submitit" / "42_1"
    assert w.settled(3) and w.settled(5)


def test_no_answer_from_squeue_never_loses_a_point(tmp_path: Path) -> None:
    sched, clock = Scheduler(), Clock()
    w = watchdog(tmp_path, set(), sched, clock)
    submit(tmp_path / ".submitit", "42_0")
    sched.states = None
    for t in range(0, 1000, 50):
        clock.t = t
        w.poll()
    assert not w.lost


def test_a_job_the_controller_forgot_is_lost_with_its_state_unknown(tmp_path: Path) -> None:
    sched, clock = Scheduler(), Clock()
    w = watchdog(tmp_path, set(), sched, clock)
    submit(tmp_path / ".submitit", "42_1")
    w.poll()
    clock.t = 20
    w.poll()
    assert "left the queue" in w.lost[5].message and "unknown" in w.lost[5].message


def test_a_result_pickle_settles_a_point_too(tmp_path: Path) -> None:
    sched, clock = Scheduler(), Clock()
    w = watchdog(tmp_path, set(), sched, clock)
    d = submit(tmp_path / ".submitit", "42_0")
    (d / "42_0_0_result.pkl").write_bytes(b"x")
    w.poll()
    clock.t = 100
    w.poll()
    assert not w.lost and w.settled(3) and w.finished(3)


def test_a_job_running_past_its_time_limit_is_cancelled_and_lost(tmp_path: Path) -> None:
    sched, clock = Scheduler(), Clock()
    w = watchdog(tmp_path, set(), sched, clock)
    submit(tmp_path / ".submitit", "42_0")
    sched.states = {"42_0": info("42_0", "RUNNING", elapsed="10:30")}  # limit 10:00 + 60 s
    w.poll()
    assert not w.lost
    sched.states = {"42_0": info("42_0", "RUNNING", elapsed="11:01")}
    w.poll()
    assert sched.cancelled == ["42_0"]
    assert "600 s time limit; llem cancelled it" in w.lost[3].message


def test_run_returns_when_every_point_is_settled_even_if_the_launcher_never_does(
    tmp_path: Path,
) -> None:
    sched, clock, results = Scheduler(), Clock(), set()
    w = watchdog(tmp_path, results, sched, clock)
    never = threading.Event()

    def launch() -> list:
        submit(tmp_path / ".submitit", "42_0")
        submit(tmp_path / ".submitit", "42_1")
        results.add(3)
        (tmp_path / ".submitit" / "42_0" / "42_0_0_result.pkl").write_bytes(b"x")
        sched.states = {"42_1": info("42_1", "CANCELLED")}
        never.wait()  # submitit waiting for 42_1's result file, forever
        return []

    def advance() -> None:
        while not never.is_set():
            clock.t += 1
            time.sleep(0.005)

    ticker = threading.Thread(target=advance, daemon=True)
    ticker.start()
    t0 = time.monotonic()
    try:
        results_back, error = w.run(launch)
    finally:
        never.set()
    assert time.monotonic() - t0 < 10
    assert results_back == [] and error is None
    assert list(w.lost) == [5]


def test_run_returns_the_launchers_results_when_it_finishes(tmp_path: Path) -> None:
    sched, clock = Scheduler(), Clock()
    w = watchdog(tmp_path, set(), sched, clock)
    assert w.run(lambda: ["a", "b"]) == (["a", "b"], None)


def test_run_waits_for_running_jobs_after_the_launcher_raised(tmp_path: Path) -> None:
    """With accounting, submitit raises for a cancelled job and stops waiting for the rest."""
    sched, clock, results = Scheduler(), Clock(), set()
    w = watchdog(tmp_path, results, sched, clock)
    submit(tmp_path / ".submitit", "42_0")
    submit(tmp_path / ".submitit", "42_1")
    sched.states = {"42_0": info("42_0", "RUNNING"), "42_1": info("42_1", "CANCELLED")}
    polls = {"n": 0}
    real_poll = w.poll

    def poll() -> None:
        polls["n"] += 1
        clock.t += 6
        if polls["n"] == 5:
            results.add(3)  # the running job finishes a few polls later
        real_poll()

    w.poll = poll  # type: ignore[method-assign]

    def launch() -> list:
        raise RuntimeError("Job 42_1 has not produced any output (state: CANCELLED)")

    _, error = w.run(launch)
    assert isinstance(error, RuntimeError)
    assert polls["n"] >= 5  # it did not stop at the launcher's error
    assert list(w.lost) == [5] and w.settled(3)


def test_squeue_times_parse() -> None:
    assert slurm_seconds("1-02:03:04") == 86400 + 7384
    assert slurm_seconds("03:04") == 184
    assert slurm_seconds("UNLIMITED") is None
    jobs = parse_squeue("7_2|9|CANCELLED by 0|None|vm|0:01|1:00:00\nbad line\n")
    assert list(jobs) == ["7_2"] and jobs["7_2"].state == "CANCELLED"
    assert jobs["7_2"].limit_s == 3600

"""Keeping a SLURM sweep from waiting forever for a job that ended without a result.

hydra-submitit-launcher waits for each job's result file; it learns that a job ended any other
way only from ``sacct``, which needs SLURM's accounting daemon. Without accounting, a job that
was cancelled, killed (out of memory, node failure) or stopped at its time limit before writing
its result leaves ``--multirun`` waiting forever; with accounting, submitit raises for that job
and stops waiting for the ones after it.

So for a SLURM launcher llem's sweeper runs the launch in a helper thread and watches the jobs
itself, with ``squeue`` (``-t all`` also lists jobs that ended within the controller's
``MinJobAge``). A point is settled when its result.json is written, when its job's result file
is, or when its job has left the queue (ended in any state, or is no longer listed) and neither
file appeared within ``grace_s`` (``hydra.sweeper.result_grace_s``, 60 s by default: on NFS a
finished job's result can take up to a minute to show on the submit node): that point is lost,
and the sweeper records it as failed with the scheduler's state and reason, never over a result
that exists (``llem.sweep.launch``). A job still running ``overrun_s`` past its time limit is
cancelled (``scancel``) and lost the same way, and so is a job pending for a reason that means
it will never start (``llem.sweep.unstartable``: ``PartitionConfig``, a request no node of its
partition can hold) for ``unstartable_s`` (``hydra.sweeper.unstartable_s``, 120 s). Each poll
tells ``on_pending`` why the points still in the queue wait (the progress display). Once every
point is settled the sweep goes on, whether or not the launcher ever returns. A failing
``squeue`` never loses a point.

Jobs are found by their submission files in the launcher's ``submitit_folder``: the ones that
appear during this launch, array task ``i`` being the launch's ``i``-th point.
"""

from __future__ import annotations

import glob
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llem.sweep.squeue import (
    ACTIVE_STATES,
    JobInfo,
    scancel,
    squeue,
)
from llem.sweep.unstartable import Node, never_starts, sinfo

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn
    from hydra.plugins.launcher import Launcher

log = logging.getLogger("llem.sweep")

SUBMITTED_SUFFIX = "_submitted.pkl"
# How long a job that left the queue has for its result to become visible here (on NFS a
# finished job's file can take up to a minute to show on the submit node).
RESULT_GRACE_S = 60.0
# How long a job may stay pending for a reason that means it will never start (the reason can be
# passing while an administrator changes a partition) before llem cancels it and fails its point.
UNSTARTABLE_S = 120.0
SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


@dataclass
class Lost:
    """A point whose job ended without a result: what the scheduler said about it."""

    job_id: str
    message: str
    slurm_job_id: str | None = None
    node: str | None = None
    log_dir: Path | None = None
    never_started: bool = False  # pending until llem cancelled it: it could never start


def is_slurm_launcher(launcher: Any) -> bool:
    names = {f"{c.__module__}.{c.__qualname__}" for c in type(launcher).__mro__}
    return SLURM_LAUNCHER in names


def submitit_glob(launcher: Any) -> str | None:
    """The glob that matches every job folder of this launcher (its ``submitit_folder``)."""
    folder = getattr(launcher, "params", {}).get("submitit_folder")
    if not folder:
        return None
    pattern = str(folder)
    for tag in ("%j", "%t", "%A", "%a"):
        pattern = pattern.replace(tag, "*")
    return pattern


class SlurmWatchdog:
    """Watches one launch (one job array) of a sweep; see the module docstring."""

    def __init__(
        self,
        folder_glob: str,
        points: Sequence[int],
        settled_by_result: Callable[[int], bool],
        grace_s: float = RESULT_GRACE_S,
        poll_s: float = 5.0,
        overrun_s: float = 300.0,
        query: Callable[[Sequence[str]], dict[str, JobInfo] | None] = squeue,
        cancel: Callable[[str], None] = scancel,
        clock: Callable[[], float] = time.monotonic,
        unstartable_s: float = UNSTARTABLE_S,
        capacity: Callable[[str], list[Node] | None] = sinfo,
        on_pending: Callable[[dict[int, str]], object] | None = None,
    ) -> None:
        self.folder_glob = folder_glob
        self.points = list(points)  # grid indices, in launch order (= array task index)
        self.settled_by_result = settled_by_result
        self.grace_s, self.poll_s, self.overrun_s = grace_s, poll_s, overrun_s
        self.query, self.cancel, self.clock = query, cancel, clock
        self.unstartable_s, self.capacity, self.on_pending = unstartable_s, capacity, on_pending
        self.partitions: dict[str, list[Node] | None] = {}  # sinfo's answers, asked once each
        self.stuck_since: dict[int, float] = {}  # pending for a reason that means never
        self.known_before: set[str] = self._submitted()
        self.jobs: dict[int, tuple[str, Path]] = {}  # grid index -> (job id, its folder)
        self.gone_since: dict[int, float] = {}
        self.info: dict[int, JobInfo] = {}
        self.lost: dict[int, Lost] = {}

    # ------------------------------------------------------------------ finding the jobs
    def _submitted(self) -> set[str]:
        return set(glob.glob(f"{self.folder_glob}/*{SUBMITTED_SUFFIX}"))

    def discover(self) -> None:
        for path in sorted(self._submitted() - self.known_before):
            p = Path(path)
            job_id = p.name[: -len(SUBMITTED_SUFFIX)]
            _, _, task = job_id.partition("_")
            if task.isdigit() and int(task) < len(self.points):
                index = self.points[int(task)]
            elif not task and len(self.points) == 1:
                index = self.points[0]
            else:
                continue
            self.jobs.setdefault(index, (job_id, p.parent))

    # ------------------------------------------------------------------ watching
    def _pickled(self, index: int) -> bool:
        """The job wrote submitit's result file (the launcher will read it)."""
        job = self.jobs.get(index)
        return bool(job and glob.glob(f"{glob.escape(str(job[1]))}/{job[0]}_*_result.pkl"))

    def settled(self, index: int) -> bool:
        """Nothing more will come for this point: a result, or its job is lost."""
        return index in self.lost or self.settled_by_result(index) or self._pickled(index)

    def finished(self, index: int) -> bool:
        """Settled, and its job is not expected to write anything the launcher waits for."""
        if index in self.lost or self._pickled(index):
            return True
        since = self.gone_since.get(index)
        gone = since is not None and self.clock() - since >= self.grace_s
        return self.settled_by_result(index) and gone

    def poll(self) -> None:
        """Find new jobs, ask the scheduler about the unfinished ones, declare the lost ones."""
        self.discover()
        waiting = {
            i: job for i, job in self.jobs.items() if i not in self.lost and not self._pickled(i)
        }
        if not waiting:
            return
        arrays = sorted({job_id.split("_")[0] for job_id, _ in waiting.values()})
        answer = self.query(arrays)
        if answer is None:  # no answer from the scheduler: nothing is concluded
            return
        now = self.clock()
        for index, (job_id, folder) in waiting.items():
            info = answer.get(job_id)
            if info is not None:
                self.info[index] = info
            if info is not None and info.state in ACTIVE_STATES:
                self.gone_since.pop(index, None)
                self._active(index, job_id, folder, info, now)
                continue
            first = self.gone_since.setdefault(index, now)
            if now - first >= self.grace_s and not self.settled(index):
                self._lose(index, job_id, folder, info or self.info.get(index))
        self._report_pending(waiting)

    def _active(self, index: int, job_id: str, folder: Path, info: JobInfo, now: float) -> None:
        """A job in the queue: cancelled when it overran its time limit or can never start."""
        if self._overran(info) and not self.settled_by_result(index):
            self.cancel(job_id)
            self._lose(index, job_id, folder, info, overran=True)
            return
        why = None
        if info.state == "PENDING":
            why = never_starts(info.reason, info.request, self._nodes)
        if why is None:
            self.stuck_since.pop(index, None)
            return
        since = self.stuck_since.setdefault(index, now)
        if now - since >= self.unstartable_s and not self.settled_by_result(index):
            self.cancel(job_id)
            message = f"SLURM job {job_id} can never start: {why}; llem cancelled it"
            self._lose(index, job_id, folder, info, message=message)
            self.lost[index].never_started = True

    def _nodes(self, partition: str) -> list[Node] | None:
        if partition not in self.partitions:
            self.partitions[partition] = self.capacity(partition)
        return self.partitions[partition]

    def _report_pending(self, watched: dict[int, tuple[str, Path]]) -> None:
        """Tell ``on_pending`` why each watched point still waits in the queue."""
        if self.on_pending is None:
            return
        pending = {
            i: self.info[i].reason or "no reason given"
            for i in watched
            if i not in self.lost and i in self.info and self.info[i].state == "PENDING"
        }
        self.on_pending(pending)

    def _overran(self, info: JobInfo) -> bool:
        return (
            info.state == "RUNNING"
            and info.elapsed_s is not None
            and info.limit_s is not None
            and info.elapsed_s > info.limit_s + self.overrun_s
        )

    def _lose(
        self,
        index: int,
        job_id: str,
        folder: Path,
        info: JobInfo | None,
        overran: bool = False,
        message: str | None = None,
    ) -> None:
        message = message or self._message(job_id, info, overran)
        self.lost[index] = Lost(
            job_id=job_id,
            message=message,
            slurm_job_id=info.slurm_job_id if info else None,
            node=(info.node or None) if info else None,
            log_dir=folder,
        )
        log.warning("#%d: %s", index, message)

    @staticmethod
    def _message(job_id: str, info: JobInfo | None, overran: bool) -> str:
        if overran and info is not None:
            message = (
                f"SLURM job {job_id} was still {info.state} {info.elapsed_s:.0f} s into a "
                f"{info.limit_s:.0f} s time limit; llem cancelled it"
            )
        elif info is None:
            message = (
                f"SLURM job {job_id} left the queue without writing a result; its final state "
                "is unknown (the controller no longer lists it)"
            )
        else:
            reason = f", reason {info.reason}" if info.reason and info.reason != "None" else ""
            where = f" on {info.node}" if info.node else ""
            message = (
                f"SLURM job {job_id}{where} ended {info.state}{reason} without writing a result"
            )
        return message

    # ------------------------------------------------------------------ the launch
    def run(
        self, launch: Callable[[], Sequence[JobReturn]]
    ) -> tuple[Sequence[JobReturn], Exception | None]:
        """Run ``launch`` in a helper thread until it returns or every point is settled.

        Returns (the launcher's results, or [] when it did not return; the exception it raised).
        """
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["results"] = launch()
            except Exception as exc:  # reported to the sweeper, which records the points
                box["error"] = exc

        thread = threading.Thread(target=target, name="llem-slurm-launch", daemon=True)
        quiet = _NoSacctWarnings()
        submitit_log = logging.getLogger("submitit")
        submitit_log.addFilter(quiet)
        thread.start()
        try:
            return self._wait(thread, box)
        finally:
            submitit_log.removeFilter(quiet)

    def _wait(
        self, thread: threading.Thread, box: dict[str, Any]
    ) -> tuple[Sequence[JobReturn], Exception | None]:
        while True:
            thread.join(timeout=self.poll_s)
            if not thread.is_alive() and "error" not in box:
                return box.get("results", []), None
            self.poll()
            if thread.is_alive():
                # Every job is done with, but the launcher waits for one that will never write
                # its result file: go on without it.
                if all(self.finished(i) for i in self.points) and not all(
                    self._pickled(i) for i in self.points
                ):
                    log.info("every point is accounted for; not waiting for the launcher")
                    return box.get("results", []), None
                continue
            # The launcher raised: wait for the submitted jobs it stopped waiting for.
            if all(self.settled(i) for i in self.points if i in self.jobs):
                return box.get("results", []), box["error"]


class _NoSacctWarnings(logging.Filter):
    """submitit warns at every ``sacct`` call that fails (no accounting); llem says it once."""

    def __init__(self) -> None:
        super().__init__()
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if "sacct error" not in record.getMessage():
            return True
        if not self.said:
            self.said = True
            log.info(
                "sacct is not available (no SLURM accounting): llem watches the jobs with squeue"
            )
        return False


def watch(
    launcher: Launcher,
    points: list[int],
    settled_by_result: Callable[[int], bool],
    grace_s: float = RESULT_GRACE_S,
    unstartable_s: float = UNSTARTABLE_S,
    on_pending: Callable[[dict[int, str]], object] | None = None,
) -> SlurmWatchdog | None:
    """A watchdog for this launch when the launcher submits to SLURM, else None."""
    if not is_slurm_launcher(launcher):
        return None
    pattern = submitit_glob(launcher)
    if pattern is None:
        log.warning("no submitit_folder in the launcher's settings: jobs are not watched")
        return None
    return SlurmWatchdog(
        pattern,
        points,
        settled_by_result,
        grace_s=grace_s,
        unstartable_s=unstartable_s,
        on_pending=on_pending,
    )

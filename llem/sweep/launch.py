"""Launching a sweep's points and collecting how each ended.

In-process (Hydra's default ``basic`` launcher): the points run one at a time in this process,
each through Hydra's own ``run_job`` on the config planning composed (``PointComposer.job_config``,
equal to what the launcher would compose again), so each keeps Hydra's output directory, its
``.hydra/`` files, job logging and callbacks. Any other launcher gets the points' overrides, as
Hydra's launchers expect, in batches (``batch_size``); with SLURM, ``llem.sweep.watchdog`` fails a
point whose job ends without a result instead of leaving the sweep waiting.

Each launched point ends with an outcome: its job's return, else its fresh result.json, else a
failed result.json written here saying why (the process died, the launcher failed, SLURM lost it).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf, open_dict

from llem.atomic import atomic_write_text
from llem.errors import first_line
from llem.hydra.compose.points import PointComposer
from llem.hydra.overrides import without_key
from llem.result import RESULT_FILE, ErrorInfo, RunResult, write_unmeasured
from llem.sweep.outcomes import JobOutcome
from llem.sweep.plan import Plan, Point
from llem.sweep.plan_file import read_position
from llem.sweep.progress import ResultWatcher, SweepProgress
from llem.sweep.watchdog import RESULT_GRACE_S, UNSTARTABLE_S, Lost, watch

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn
    from hydra.plugins.launcher import Launcher
    from hydra.types import HydraContext, TaskFunction

log = logging.getLogger("llem.sweep")

# Launchers whose jobs run on this machine: one point at a time unless max_batch_size says so.
_LOCAL_LAUNCHERS = {
    "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
}


# Loggers of Hydra's launchers, which log every batch's directory and each job's overrides at
# INFO: llem's own line per point (or batch) says which points start.
_LAUNCHER_LOGGERS = ("hydra_plugins.hydra_joblib_launcher", "hydra_plugins.hydra_submitit_launcher")


@contextlib.contextmanager
def quiet_launcher_log() -> Iterator[None]:
    """Hydra's launchers log their warnings and errors only, while they launch."""
    loggers = [logging.getLogger(name) for name in _LAUNCHER_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def fingerprint(path: Path) -> tuple | None:
    """Identity of a file version (atomic writes replace the inode), None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def in_process(config: DictConfig) -> bool:
    """Whether the sweep's launcher is Hydra's default, which runs jobs in this process."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None) or {}
    return str(choices.get("hydra/launcher", "basic")) == "basic"


def runs_here(launcher: Launcher | None) -> bool:
    """Whether ``launcher`` runs its jobs on this machine (joblib, submitit's local one)."""
    names = {f"{c.__module__}.{c.__qualname__}" for c in type(launcher).__mro__}
    return bool(names & _LOCAL_LAUNCHERS)


def batch_size(
    launcher: Launcher | None, max_batch_size: int | None, n_points: int, local: bool
) -> int:
    """Points handed to the launcher at once: 1 in-process and, unless ``max_batch_size`` says
    otherwise, for launchers on this machine; every point for a cluster launcher."""
    if local:
        return 1
    if max_batch_size:
        return max(1, int(max_batch_size))
    return 1 if runs_here(launcher) else max(n_points, 1)


def job_overrides(point: Point, force_no_reuse: bool) -> list[str]:
    """A point's overrides as its job gets them: its grid index is its directory."""
    job = list(point.overrides)
    if force_no_reuse:
        job = without_key(job, "sweep.reuse_model")
        job.append("sweep.reuse_model=false")
    return job + [f"hydra.sweep.subdir={point.index}"]


def run_in_process(
    hydra_context: HydraContext,
    task_function: TaskFunction,
    config: DictConfig,
    composer: PointComposer,
    jobs: Sequence[Sequence[str]],
    initial_job_idx: int,
) -> list[JobReturn]:
    """Hydra's basic launcher, on the configs planning composed: ``run_job`` per job."""
    from hydra.core.utils import configure_log, run_job, setup_globals

    setup_globals()
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    returns = []
    for k, overrides in enumerate(jobs):
        job_config = composer.job_config(list(overrides))
        with open_dict(job_config):
            job_config.hydra.job.id = initial_job_idx + k
            job_config.hydra.job.num = initial_job_idx + k
        returns.append(
            run_job(
                hydra_context=hydra_context,
                task_function=task_function,
                config=job_config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
        )
        configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    return returns


def outcome(point: Point, status: str, error: str | None = None) -> JobOutcome:
    """The outcome the sweeper records for ``point``."""
    return JobOutcome(
        status=status,
        overrides=list(point.overrides),
        index=point.index,
        label=point.label,
        error=error,
    )


def write_point_record(
    sweep_dir: Path,
    point: Point,
    status: str,
    error: ErrorInfo,
    slurm_job_id: str | None = None,
    node: str | None = None,
    replace: bool = True,
) -> None:
    """A point's result.json written for the sweeper (skipped, or a job that left none), with
    its overrides.yaml where Hydra wrote none (``llem.result.write_unmeasured``)."""
    point_dir = sweep_dir / str(point.index)
    overrides_file = point_dir / ".hydra" / "overrides.yaml"
    if not overrides_file.exists():
        atomic_write_text(overrides_file, "".join(f"- {json.dumps(o)}\n" for o in point.overrides))
    write_unmeasured(
        point_dir,
        status=status,
        error=error,
        config_hash=point.config_hash,
        overrides=list(point.overrides),
        sweep=read_position(sweep_dir, point.index),
        slurm_job_id=slurm_job_id,
        node=node,
        replace=replace,
    )


def _job_value(ret: JobReturn | None) -> tuple[Any, BaseException | None]:
    """(return value, exception) of a job's return: a job may have raised in another process."""
    if ret is None:
        return None, None
    try:
        return ret.return_value, None
    except Exception as exc:
        return None, exc


def _lost_error(lost: Lost) -> ErrorInfo:
    if lost.never_started:
        return ErrorInfo(
            "SlurmJobLost",
            lost.message,
            "ask for what a node of the partition has (hydra.launcher.cpus_per_task, mem_gb, "
            "gpus_per_task, timeout_min) or choose another partition (hydra.launcher.partition); "
            f"its logs are in {lost.log_dir}",
        )
    return ErrorInfo(
        "SlurmJobLost",
        lost.message,
        f"the scheduler ended the job before it wrote a result (cancelled, out of memory, node "
        f"failure, time limit); its logs are in {lost.log_dir}; run the same command again to "
        "re-run only the points that did not finish",
    )


def _fresh_result(point_dir: Path, before: tuple | None) -> RunResult | None:
    """The point's result.json when its job wrote one (it differs from the one before)."""
    return RunResult.read(point_dir) if fingerprint(point_dir / RESULT_FILE) != before else None


def _record_lost(point: Point, point_dir: Path, before: tuple | None, lost: Lost) -> RunResult:
    """The lost-job record, which never replaces a result the job wrote: looked for again right
    before writing, and written only where no result.json exists (a result can become visible
    late on a shared file system)."""
    result = _fresh_result(point_dir, before)
    if result is not None:
        return result
    error = _lost_error(lost)
    replace = before is not None  # an older result.json (planning normally moved it aside)
    try:
        write_point_record(
            point_dir.parent, point, "failed", error, lost.slurm_job_id, lost.node, replace
        )
    except FileExistsError:
        log.warning("#%d: its result.json appeared after its job was declared lost", point.index)
        return RunResult.read(point_dir) or RunResult(status="failed", error=error)
    return RunResult(status="failed", error=error)


def collect(
    point: Point,
    ret: JobReturn | None,
    launch_error: BaseException | None,
    point_dir: Path,
    before: tuple | None,
    lost: Lost | None = None,
) -> tuple[str, str | None]:
    """(status, error) of a launched point: its job's return, else its fresh result.json.

    A point whose job came back with neither (its process died, the launcher failed, the
    scheduler ended its job: ``lost``) gets a failed result.json saying so, so that every
    launched point has a result.
    """
    value, job_error = _job_value(ret)
    if isinstance(value, JobOutcome):
        return value.status, value.error
    result = _fresh_result(point_dir, before)
    if result is None and lost is not None:
        result = _record_lost(point, point_dir, before, lost)
    if result is not None:
        err = result.error
        return result.status, (f"{err.type}: {err.message}" if err else None)
    cause = job_error or launch_error
    if job_error is None and launch_error is not None:
        hint = (
            "the launcher could not run this point; fix that and run the same command "
            "again: finished points are kept"
        )
    else:
        hint = (
            "the point's process ended without writing a result; see llem.log in its "
            "directory and the launcher's logs (submitit: <sweep dir>/.submitit/)"
        )
    error = ErrorInfo(
        type(cause).__name__ if cause else "NoResult",
        first_line(cause) if cause else "the job returned without writing a result",
        hint,
    )
    write_point_record(point_dir.parent, point, "failed", error)
    return "failed", f"{error.type}: {error.message}"


@dataclass
class SweepLaunch:
    """Everything one sweep's batches share; ``batch`` launches one and records its outcomes."""

    hydra_context: HydraContext
    task_function: TaskFunction
    config: DictConfig
    launcher: Launcher
    composer: PointComposer
    plan: Plan
    sweep_dir: Path
    progress: SweepProgress
    outcomes: list[JobOutcome]
    local: bool  # in-process
    force_no_reuse: bool
    result_grace_s: float = RESULT_GRACE_S  # SLURM: hydra.sweeper.result_grace_s
    unstartable_s: float = UNSTARTABLE_S  # SLURM: hydra.sweeper.unstartable_s

    def _start(self, points: list[Point], chunk: list[int]) -> int:
        """Tell the progress what starts; return Hydra's index of the batch's first job."""
        first = self.plan.position(chunk[0]) or 1
        if len(points) == 1:
            self.progress.starting(first, points[0].index, points[0].label)
            return points[0].index
        self.progress.launching(first, first + len(points) - 1, [p.label for p in points])
        return first - 1

    def _run(self, jobs: list[list[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        if self.local:
            return run_in_process(
                self.hydra_context,
                self.task_function,
                self.config,
                self.composer,
                jobs,
                initial_job_idx,
            )
        with quiet_launcher_log():
            return self.launcher.launch(jobs, initial_job_idx=initial_job_idx)

    def batch(self, chunk: list[int]) -> Sequence[JobReturn]:
        """Launch ``chunk`` (grid indices) as one batch; record an outcome for each point."""
        points = [self.plan.points[i] for i in chunk]
        dirs = {p.index: self.sweep_dir / str(p.index) for p in points}
        before = {i: fingerprint(d / RESULT_FILE) for i, d in dirs.items()}
        jobs = [job_overrides(p, self.force_no_reuse) for p in points]
        initial_job_idx = self._start(points, chunk)
        watcher = None
        if len(points) > 1:
            labels = {p.index: p.label for p in points}
            watcher = ResultWatcher(self.progress, dirs, labels, before, _result_fingerprint)
        # SLURM: a job that ends without a result must not leave the launcher waiting forever.
        guard = watch(
            self.launcher,
            [p.index for p in points],
            lambda i: fingerprint(dirs[i] / RESULT_FILE) != before[i],
            grace_s=self.result_grace_s,
            unstartable_s=self.unstartable_s,
            on_pending=self.progress.pending,
        )
        results: Sequence[JobReturn] = []
        launch_error: BaseException | None = None
        finished = False
        try:
            with watcher or contextlib.nullcontext():
                try:
                    if guard is None:
                        results = self._run(jobs, initial_job_idx)
                    else:
                        results, launch_error = guard.run(lambda: self._run(jobs, initial_job_idx))
                except Exception as exc:  # the launcher failed: a worker died, sbatch refused...
                    launch_error = exc
                    log.error("the launcher failed: %s: %s", type(exc).__name__, first_line(exc))
            finished = True
        finally:
            self._record(points, results, launch_error, dirs, before, finished, guard, watcher)
        return results

    def _record(
        self,
        points: list[Point],
        results: Sequence[JobReturn],
        launch_error: BaseException | None,
        dirs: dict[int, Path],
        before: dict[int, tuple | None],
        finished: bool,
        guard: Any,
        watcher: ResultWatcher | None,
    ) -> None:
        for k, p in enumerate(points):
            ret = results[k] if k < len(results) else None
            if finished:
                lost = guard.lost.get(p.index) if guard else None
                status, error = collect(p, ret, launch_error, dirs[p.index], before[p.index], lost)
            else:  # interrupted: whatever the run wrote (failed, KeyboardInterrupt) stands
                if fingerprint(dirs[p.index] / RESULT_FILE) == before[p.index]:
                    continue
                status, error = "interrupted", "KeyboardInterrupt (result.json: failed)"
            self.outcomes.append(outcome(p, status, error))
            if finished and not (watcher and p.index in watcher.reported):
                self.progress.done(p.index, p.label, status)


def _result_fingerprint(point_dir: Path) -> tuple | None:
    return fingerprint(point_dir / RESULT_FILE)

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
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf, open_dict

from llem.errors import first_line
from llem.hydra.compose.points import PointComposer
from llem.hydra.overrides import without_key
from llem.result import RESULT_FILE
from llem.sweep.collect import collect, fingerprint, point_outcome
from llem.sweep.outcomes import JobOutcome
from llem.sweep.plan import Plan, Point
from llem.sweep.progress import ResultWatcher, SweepProgress
from llem.sweep.watchdog import RESULT_GRACE_S, UNSTARTABLE_S, watch

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
            self.outcomes.append(point_outcome(p, status, error))
            if finished and not (watcher and p.index in watcher.reported):
                self.progress.done(p.index, p.label, status)


def _result_fingerprint(point_dir: Path) -> tuple | None:
    return fingerprint(point_dir / RESULT_FILE)

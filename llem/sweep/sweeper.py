"""llem's Hydra sweeper: Hydra's grid syntax (lists, ``range()``, ``choice()``), plus planning.

Before the first model loads it composes and validates every grid point (``llem.sweep.planner``).
Points that break a cross-field rule are written as ``status: skipped`` with the reason; a Hydra
composition error (bad key, bad type) stops everything at once with exit code 2. Where the points
run on this machine, every point's pre-flight checks run too: a problem that every point
shares (a missing dataset file) stops the sweep as it stops a single run, in one line with exit code
3, before anything is written; a problem of some points fails those points when they run. Finished
points are not run again (resume); the rest run in the configured order, each in ``<sweep dir>/<grid
index>``, through whichever Hydra launcher is configured (``llem.sweep.launch``). ``dry_run=true``
prints the plan and pre-flight results and launches nothing. A real sweep holds the sweep
directory's lock (``llem.sweep.lock``), taken before any point is composed when the directory
exists: a second sweep into the same directory stops at once.

Launching. With Hydra's default (in-process) launcher the points run one at a time in this process,
on the configs planning composed, and consecutive points with the same load key share one loaded
model (``sweep.reuse_model``). Launchers that start other processes get ``sweep.reuse_model=false``
added to every job. Launchers that run on this machine (``joblib``, ``submitit_local``) get one
point at a time by default, because points measured concurrently on one device distort each
other's timings and energy; any other launcher (``submitit_slurm`` and presets built on it, such
as ``slurm_gpu``) gets every runnable point in one batch, so the cluster runs them in parallel.
``hydra.sweeper.max_batch_size=N`` sets the batch size for launchers other than the in-process one.
Whatever the batch, each point's directory is its grid index. On a terminal ``llem.sweep.display``
shows a live progress display.

What the command that started the sweep needs to know (its directory, its lock, the live display,
every point's outcome) goes to the ``SweepListener`` that llem's entrypoint attaches to its task
function (``llem.sweep.outcomes``).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from llem.errors import ConfigError, LlemError, PreflightError, interrupted_by
from llem.hydra.compose.studies import check_study, record_study
from llem.hydra.overrides import swept_keys
from llem.result import ErrorInfo
from llem.runner.load_times import this_host_load_times
from llem.runner.preflight import cuda_available
from llem.sweep import display
from llem.sweep.collect import point_outcome, write_point_record
from llem.sweep.launch import SweepLaunch, batch_size, in_process, runs_here
from llem.sweep.lock import SweepLock
from llem.sweep.outcomes import JobOutcome, SweepListener, listener_of
from llem.sweep.plan import Plan
from llem.sweep.plan_file import write_plan
from llem.sweep.planner import Planner, SweepSettings, make_plan
from llem.sweep.point_dirs import settle_directories
from llem.sweep.progress import SweepProgress, summary_lines

log = logging.getLogger("llem.sweep")


@dataclass
class GridSweeperConf:
    """The grid sweeper's own settings (``llem.sweep.search_sweeper.LlemSweeperConf`` adds the
    search's: llem's sweeper options are that class)."""

    _target_: str = "hydra_plugins.llem_sweeper.llem_sweeper.LlemSweeper"
    # Points handed to the launcher at once (not for the in-process launcher, which always runs
    # one at a time). None: 1 for launchers that run on this machine, every point for the others.
    max_batch_size: int | None = None
    params: dict[str, str] | None = None
    # auto: a live progress display when the output is a terminal, plain log lines otherwise;
    # live | plain force one or the other.
    progress: str = "auto"
    # SLURM: seconds a job that left the queue has for its result to appear before its point is
    # recorded as lost (on NFS a finished job's result can take up to a minute to show here).
    result_grace_s: float = 60.0
    # SLURM: seconds a job may stay pending for a reason that means it will never start
    # (PartitionConfig, a request no node of the partition can hold) before its point fails.
    unstartable_s: float = 120.0


class GridSweeper(Sweeper):
    """Hydra's grid syntax plus llem's planning, skipping, resume, ordering and batching.

    Built on Hydra's public ``Sweeper`` API: ``setup`` gets the launcher from Hydra's plugin
    registry, ``sweep`` parses the command line with Hydra's ``OverridesParser``.
    """

    def __init__(
        self,
        max_batch_size: int | None = None,
        params: dict[str, str] | None = None,
        progress: str = "auto",
        result_grace_s: float = 60.0,
        unstartable_s: float = 120.0,
    ) -> None:
        super().__init__()
        self.result_grace_s = float(result_grace_s)
        self.unstartable_s = float(unstartable_s)
        self.max_batch_size = max_batch_size
        self.progress = progress
        self.params: dict[str, str] = dict(params or {})
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None
        self.task_function: TaskFunction | None = None
        self.listener: SweepListener | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.task_function = task_function
        self.listener = listener_of(task_function)
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def check_settings(self) -> None:
        """The sweeper's own settings (``hydra.sweeper.*``); a bad one is a ConfigError."""
        if self.progress not in display.MODES:
            raise ConfigError(
                f"hydra.sweeper.progress={self.progress}: allowed values are "
                + ", ".join(display.MODES)
            )
        for name in ("result_grace_s", "unstartable_s"):
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"hydra.sweeper.{name}={getattr(self, name)}: must be 0 or more seconds"
                )

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        self.check_settings()
        planner = Planner(self.hydra_context, self.config)
        jobs = planner.jobs(self.params, arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        planner.swept = swept_keys(jobs) if len(jobs) > 1 else []
        check_study(self.config, self.hydra_context.config_loader)
        settings = planner.settings(jobs[0])
        planner.dry_run = settings.dry_run
        planner.has_cuda = cuda_available()
        if settings.dry_run:
            self._started(sweep_dir, None)
            return self._dry_run(planner, jobs, sweep_dir, settings)
        lock = SweepLock(sweep_dir)
        try:
            if sweep_dir.is_dir():  # a busy directory is refused before any point is composed
                self._take(lock)
            planner.check_preflight = in_process(self.config) or runs_here(self.launcher)
            plan = make_plan(
                jobs,
                planner.analyse,
                sweep_dir,
                settings.order,
                settings.seed,
                before_reading=lambda: self._take(lock),
            )
            plan.load_times = self._load_times()
            refuse_shared_preflight(plan, lock)
            self._ready(lock)
            return self._run(planner, plan, sweep_dir, settings)
        finally:
            if self.listener is None:  # else the listener keeps it until the report is written
                lock.release()

    def _take(self, lock: SweepLock) -> None:
        """Hold the sweep directory's lock (once) and tell the listener the sweep started."""
        if not lock.held:
            self._started(lock.sweep_dir, lock.acquire())

    def _started(self, sweep_dir: Path, lock: SweepLock | None) -> None:
        if self.listener is not None:
            self.listener.sweep_started(sweep_dir, lock)

    def _ready(self, lock: SweepLock) -> None:
        """The listener's checks before the first point runs (the tracker); a refusal stops the
        sweep with nothing left in its directory, as a pre-flight problem every point shares."""
        assert self.config is not None
        if self.listener is None:
            return
        try:
            self.listener.sweep_ready(self.config)
        except LlemError:
            lock.abandon()
            raise

    def _finished(self, outcomes: list[JobOutcome], preflight_failed: bool = False) -> None:
        if self.listener is not None:
            self.listener.sweep_finished(list(outcomes), preflight_failed)

    def _dry_run(
        self, planner: Planner, jobs: list[list[str]], sweep_dir: Path, settings: SweepSettings
    ) -> list[JobReturn]:
        """Print the plan and every point's pre-flight result; launch nothing, write nothing."""
        assert self.config is not None
        plan = make_plan(jobs, planner.analyse, sweep_dir, settings.order, settings.seed)
        plan.load_times = self._load_times()
        local = in_process(self.config)
        for line in plan.describe(settings.reuse_model and local):
            print(line)
        self._finished([], preflight_failed=any(p.preflight for p in plan.points))
        return []

    def _load_times(self) -> dict[str, list[float]] | None:
        """This host's measured load times for the plan's estimate; None (no estimate) when the
        points run on other machines (a cluster launcher), whose load times are not known here."""
        assert self.config is not None
        here = in_process(self.config) or runs_here(self.launcher)
        return this_host_load_times() if here else None

    def _prepare_directory(self, plan: Plan, sweep_dir: Path, reuse: bool, size: int) -> None:
        """Settle older results, write the plan, the study and every skipped point's record."""
        assert self.config is not None and self.hydra_context is not None
        for line in settle_directories(plan.points, sweep_dir):
            log.info("%s", line)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        write_plan(sweep_dir, plan, reuse, size)
        record_study(sweep_dir, self.config, self.hydra_context.config_loader)
        for p in plan.skipped:
            reason = p.reason or "invalid combination"
            hint = "this combination is invalid; the rest of the sweep ran"
            write_point_record(sweep_dir, p, "skipped", ErrorInfo("ConfigError", reason, hint))
        log.info(plan.short(reuse))
        for p in plan.skipped:
            log.info("  skipped #%d [%s]: %s", p.index, p.label, p.reason)

    def _run(
        self, planner: Planner, plan: Plan, sweep_dir: Path, settings: SweepSettings
    ) -> list[JobReturn]:
        """Run every pending point in order, batch by batch; log the summary at the end."""
        assert self.config is not None
        local = in_process(self.config)
        reuse = settings.reuse_model and local  # other launchers: a process per point
        size = batch_size(self.launcher, self.max_batch_size, len(plan.run_order), local)
        self._prepare_directory(plan, sweep_dir, reuse, size)
        outcomes = [point_outcome(p, "skipped", p.reason) for p in plan.skipped]
        outcomes += [point_outcome(p, "done") for p in plan.done]
        progress = SweepProgress(
            len(plan.run_order), skipped=len(plan.skipped), already_done=len(plan.done)
        )
        launch = self._launch(
            planner, plan, sweep_dir, progress, outcomes, local, settings.reuse_model
        )
        returns: list[JobReturn] = []
        interrupted = False
        try:
            with self._display(progress):
                for start in range(0, len(plan.run_order), size):
                    returns.extend(launch.batch(plan.run_order[start : start + size]))
        except BaseException as exc:
            interrupted = interrupted_by(exc)
            raise
        finally:
            self._summary(plan, outcomes, progress, interrupted)
        return returns

    def _launch(
        self,
        planner: Planner,
        plan: Plan,
        sweep_dir: Path,
        progress: SweepProgress,
        outcomes: list[JobOutcome],
        local: bool,
        reuse_model: bool,
    ) -> SweepLaunch:
        """How ``plan``'s points reach the launcher; a launcher that runs each point in its own
        process cannot reuse a model, so its jobs are told not to."""
        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None and self.task_function is not None
        return SweepLaunch(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=self.config,
            launcher=self.launcher,
            composer=planner.composer,
            plan=plan,
            sweep_dir=sweep_dir,
            progress=progress,
            outcomes=outcomes,
            local=local,
            force_no_reuse=reuse_model and not local,
            result_grace_s=self.result_grace_s,
            unstartable_s=self.unstartable_s,
        )

    def _summary(
        self, plan: Plan, outcomes: list[JobOutcome], progress: SweepProgress, interrupted: bool
    ) -> None:
        assert self.config is not None
        if interrupted:  # the interrupted job left its own logging in place
            from hydra.core.utils import configure_log

            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        launched = {o.index for o in outcomes}
        not_run = sum(1 for i in plan.run_order if i not in launched)
        for line in summary_lines(outcomes, progress.elapsed_s, not_run, interrupted):
            log.info(line)
        self._finished(outcomes)

    def _display(self, progress: SweepProgress) -> Any:
        """The live display on a terminal (``hydra.sweeper.progress``), else nothing."""
        if not progress.total or not display.wanted(self.progress):
            return contextlib.nullcontext()
        assert self.config is not None
        on_terminal = self.listener.terminal_taken if self.listener is not None else None
        # a display that ticks has a thread of its own: only where no point runs on this machine
        tick = not in_process(self.config) and not runs_here(self.launcher)
        return display.LiveSweepDisplay(progress, on_terminal, tick=tick)


def shared_preflight(plan: Plan) -> list[str]:
    """The pre-flight problems that every point of the grid has (skipped ones aside): a mistake
    of the whole sweep rather than of some points. Empty when one point has none (a finished one
    included) or when nothing is to run."""
    found = [p.preflight for p in plan.points if p.status != "skipped"]
    if not plan.run_order or not found:
        return []
    return [problem for problem in found[0] if all(problem in p for p in found[1:])]


def refuse_shared_preflight(plan: Plan, lock: SweepLock) -> None:
    """A pre-flight problem that every point shares stops the sweep before any point runs, as
    it stops a single run: one ``PreflightError`` (exit 3), and nothing left in the sweep
    directory. A problem of some points only fails those points when they run."""
    shared = shared_preflight(plan)
    if not shared:
        return
    lock.abandon()
    n = len(plan.points) - len(plan.skipped)
    every = f"all {n} points of the sweep share it; " if n > 1 else ""
    raise PreflightError(shared, hint=f"{every}nothing was run or written")

"""llem's Hydra sweeper: Hydra's grid syntax (lists, ``range()``, ``choice()``), plus planning.

Before the first model loads it composes and validates every grid point. Points that break a
cross-field rule are written as ``status: skipped`` with the reason; a Hydra composition error (bad
key, bad type) stops everything at once with exit code 2. Finished points are not run again
(resume); the rest run in the configured order, each in ``<sweep dir>/<grid index>``, through
whichever Hydra launcher is configured. ``dry_run=true`` prints the plan and pre-flight results and
launches nothing.

Launching. With Hydra's default (in-process) launcher the points run one at a time in this process,
and consecutive points with the same load key share one loaded model (``sweep.reuse_model``).
Launchers that start other processes get ``sweep.reuse_model=false`` added to every job. Launchers
that run on this machine (``joblib``, ``submitit_local``) get one point at a time by default,
because points measured concurrently on one device distort each other's timings and energy; any
other launcher (``submitit_slurm`` and presets built on it, such as ``slurm_gpu``) gets every
runnable point in one batch, so the cluster runs them in parallel.
``hydra.sweeper.max_batch_size=N`` sets the batch size for launchers other than the in-process one.
Whatever the batch, each point's directory is its grid index. With a SLURM launcher,
``llem.sweep.watchdog`` watches the jobs so that one ending without a result fails its point
instead of leaving the sweep waiting. Planning composes each set of group choices once
(``llem.sweep.compose``). On a terminal ``llem.sweep.display`` shows a live progress display.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from llem.atomic import atomic_write_text
from llem.cli import condense_hydra_error, hydra_error_text
from llem.config.schema import SweepOrder
from llem.errors import ConfigError, first_line, interrupted_by
from llem.overrides import without_key
from llem.result import RESULT_FILE, ErrorInfo, RunResult
from llem.sweep import study
from llem.sweep.compose import PointComposer
from llem.sweep.plan import (
    Plan,
    Point,
    expand_grid,
    make_plan,
    read_position,
    settle_directories,
    short_label,
    swept_keys,
    write_plan,
)
from llem.sweep.progress import Progress, ResultWatcher, summary_lines
from llem.sweep.state import STATE, Outcome
from llem.sweep.watchdog import Lost, watch

log = logging.getLogger("llem.sweep")

# Launchers whose jobs run on this machine: one point at a time unless max_batch_size says so.
_LOCAL_LAUNCHERS = {
    "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
    "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
    "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
}
_BASIC_LAUNCHER_LOGGER = "hydra._internal.core_plugins.basic_launcher"


@dataclass
class LlemSweeperConf:
    _target_: str = "hydra_plugins.llem_sweeper.llem_sweeper.LlemSweeper"
    # Points handed to the launcher at once (not for the in-process launcher, which always runs
    # one at a time). None: 1 for launchers that run on this machine, every point for the others.
    max_batch_size: int | None = None
    params: dict[str, str] | None = None
    # auto: a live progress display when the output is a terminal, plain log lines otherwise;
    # live | plain force one or the other.
    progress: str = "auto"


@dataclass
class _Settings:
    dry_run: bool
    order: SweepOrder
    seed: int
    reuse_model: bool


def _fingerprint(path: Path) -> tuple | None:
    """Identity of a file version (atomic writes replace the inode), None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class _DropInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.INFO


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
    ) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.progress = progress
        self.params: dict[str, str] = dict(params or {})
        self.hydra_context: Any = None
        self.config: DictConfig | None = None
        self.launcher: Any = None
        self._swept: list[str] = []
        self._dry_run = False
        self._has_cuda = False
        self._composer: PointComposer | None = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    # ------------------------------------------------------------------ planning
    def _compose(self, index: int, overrides: list[str]) -> DictConfig:
        """The job config of one grid point; a Hydra error becomes a one-line ConfigError."""
        assert self.hydra_context is not None and self.config is not None
        if self._composer is None:
            self._composer = PointComposer(self.hydra_context.config_loader, self.config)
        try:
            return self._composer.compose(list(overrides))
        except Exception as exc:
            label = short_label(list(overrides), self._swept)
            raise ConfigError(
                f"grid point #{index} [{label}]: {condense_hydra_error(hydra_error_text(exc))}",
                hint="fix the command line; nothing was run",
            ) from exc

    def _settings(self, overrides: list[str]) -> _Settings:
        cfg = self._compose(0, overrides)
        order = cfg.sweep.order
        return _Settings(
            dry_run=bool(cfg.dry_run),
            order=order if isinstance(order, SweepOrder) else SweepOrder(str(order)),
            seed=int(cfg.sweep.seed),
            reuse_model=bool(cfg.sweep.reuse_model),
        )

    def _analyse(self, index: int, overrides: list[str]) -> Point:
        from llem.config.validate import config_hash
        from llem.runner import prepare
        from llem.runner.once import get_backend
        from llem.runner.preflight import resolve_device

        point = Point(index=index, overrides=list(overrides))
        cfg = self._compose(index, overrides)  # composition errors stop the whole sweep
        try:
            exp = prepare(cfg).exp
        except ConfigError as exc:
            if any(": no such key" in p for p in exc.problems):
                raise  # an unknown key is a typo, not an invalid combination
            point.status, point.reason = "skipped", exc.message
            return point
        point.config_hash = config_hash(exp)
        point.repeat = exp.repeat
        device = resolve_device(exp.device, self._has_cuda)
        point.load_key = get_backend(exp.backend or "pytorch").load_key(exp, device)
        if self._dry_run:
            from llem.runner.preflight import collect_problems

            point.preflight = collect_problems(exp, self._has_cuda)
        return point

    # ------------------------------------------------------------------ the sweep
    def _jobs(self, arguments: list[str]) -> list[list[str]]:
        """Every grid point's overrides (``hydra.sweeper.params`` first, then the command line)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        assert self.hydra_context is not None
        params = [f"{k}={v}" for k, v in self.params.items()] + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        try:
            return expand_grid(parser.parse_overrides(params)) or [[]]
        except Exception as exc:
            raise ConfigError(condense_hydra_error(hydra_error_text(exc))) from None

    def sweep(self, arguments: list[str]) -> Any:
        from llem.runner.preflight import cuda_available
        from llem.sweep.display import MODES

        assert self.config is not None and self.launcher is not None
        if self.progress not in MODES:
            raise ConfigError(
                f"hydra.sweeper.progress={self.progress}: allowed values are {', '.join(MODES)}"
            )
        jobs = self._jobs(arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        STATE.multirun, STATE.sweep_dir, STATE.sweep_outcomes = True, sweep_dir, []

        self._swept = swept_keys(jobs) if len(jobs) > 1 else []
        study.check_study(self.config, self.hydra_context.config_loader)
        settings = self._settings(jobs[0])
        self._dry_run = settings.dry_run
        self._has_cuda = cuda_available()
        plan = make_plan(jobs, self._analyse, sweep_dir, settings.order, settings.seed)

        in_process = self._in_process_launcher()
        reuse = settings.reuse_model and in_process  # other launchers: a process per point
        batch_size = self._batch_size(len(plan.run_order), in_process)

        if settings.dry_run:
            for line in plan.describe(reuse):
                print(line)
            STATE.dry_run_preflight_failed = any(p.preflight for p in plan.points)
            return []

        sweep_dir.mkdir(parents=True, exist_ok=True)
        for line in settle_directories(plan.points, sweep_dir):
            log.info("%s", line)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        write_plan(sweep_dir, plan, reuse, batch_size)
        study.record_study(sweep_dir, self.config, self.hydra_context.config_loader)
        for p in plan.skipped:
            self._write_record(
                sweep_dir,
                p,
                "skipped",
                ErrorInfo(
                    "ConfigError",
                    p.reason or "invalid combination",
                    "this combination is invalid; the rest of the sweep ran",
                ),
            )
        log.info(plan.short(reuse))
        for p in plan.skipped:
            log.info("  skipped #%d [%s]: %s", p.index, p.label, p.reason)

        outcomes = STATE.sweep_outcomes
        outcomes += [self._outcome(p, "skipped", p.reason) for p in plan.skipped]
        outcomes += [self._outcome(p, "done") for p in plan.done]
        force_no_reuse = settings.reuse_model and not in_process
        progress = Progress(
            len(plan.run_order), skipped=len(plan.skipped), already_done=len(plan.done)
        )
        returns: list[Any] = []
        interrupted = False
        try:
            with self._display(progress):
                self._run_batches(
                    plan,
                    batch_size,
                    sweep_dir,
                    progress,
                    outcomes,
                    in_process,
                    force_no_reuse,
                    returns,
                )
        except BaseException as exc:
            interrupted = interrupted_by(exc)
            raise
        finally:
            if in_process:
                from llem.runner import once as reuse_mod

                reuse_mod.release_all()  # the last point's model, kept for a next point
            if interrupted:  # the interrupted job left its own logging in place
                from hydra.core.utils import configure_log

                configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
            launched = {o.index for o in outcomes}
            not_run = sum(1 for i in plan.run_order if i not in launched)
            for line in summary_lines(outcomes, progress.elapsed_s, not_run, interrupted):
                log.info(line)
        return returns

    def _run_batches(
        self,
        plan: Plan,
        batch_size: int,
        sweep_dir: Path,
        progress: Progress,
        outcomes: list[Outcome],
        in_process: bool,
        force_no_reuse: bool,
        returns: list[Any],
    ) -> None:
        for start in range(0, len(plan.run_order), batch_size):
            chunk = plan.run_order[start : start + batch_size]
            returns.extend(
                self._launch(plan, chunk, sweep_dir, progress, outcomes, in_process, force_no_reuse)
            )

    def _display(self, progress: Progress) -> Any:
        """The live display on a terminal (``hydra.sweeper.progress``), else nothing."""
        from llem.sweep import display

        if not progress.total or not display.wanted(self.progress):
            return contextlib.nullcontext()
        return display.LiveDisplay(progress)

    def _launch(
        self,
        plan: Plan,
        chunk: list[int],
        sweep_dir: Path,
        progress: Progress,
        outcomes: list[Outcome],
        in_process: bool,
        force_no_reuse: bool,
    ) -> Sequence[Any]:
        """Launch ``chunk`` (grid indices) as one batch; record an outcome for each point."""
        assert self.launcher is not None
        points = [plan.points[i] for i in chunk]
        dirs = {p.index: sweep_dir / str(p.index) for p in points}
        before = {i: _fingerprint(d / RESULT_FILE) for i, d in dirs.items()}
        jobs = [self._job_overrides(p, force_no_reuse) for p in points]
        first = plan.position(chunk[0]) or 1
        if len(points) == 1:
            progress.starting(first, points[0].index, points[0].label)
            initial_job_idx = points[0].index
        else:
            progress.launching(first, first + len(points) - 1, [p.label for p in points])
            initial_job_idx = first - 1
        watcher = (
            ResultWatcher(
                progress,
                dirs,
                {p.index: p.label for p in points},
                before,
                lambda d: _fingerprint(d / RESULT_FILE),
            )
            if len(points) > 1
            else None
        )
        # SLURM: a job that ends without a result must not leave the launcher waiting forever.
        guard = watch(
            self.launcher,
            [p.index for p in points],
            lambda i: _fingerprint(dirs[i] / RESULT_FILE) != before[i],
        )
        results: Sequence[Any] = []
        launch_error: BaseException | None = None
        finished = False
        try:
            with self._quiet_basic_launcher(), watcher or contextlib.nullcontext():
                try:
                    if guard is None:
                        results = self.launcher.launch(jobs, initial_job_idx=initial_job_idx)
                    else:
                        results, launch_error = guard.run(
                            lambda: self.launcher.launch(jobs, initial_job_idx=initial_job_idx)
                        )
                except Exception as exc:  # the launcher failed: a worker died, sbatch refused...
                    launch_error = exc
                    log.error("the launcher failed: %s: %s", type(exc).__name__, first_line(exc))
            finished = True
        finally:
            for k, p in enumerate(points):
                ret = results[k] if k < len(results) else None
                if finished:
                    status, error = self._collect(
                        p,
                        ret,
                        launch_error,
                        dirs[p.index],
                        before[p.index],
                        guard.lost.get(p.index) if guard else None,
                    )
                else:  # interrupted: whatever run.py wrote (failed, KeyboardInterrupt) stands
                    fresh = _fingerprint(dirs[p.index] / RESULT_FILE) != before[p.index]
                    if not fresh:
                        continue
                    status, error = "interrupted", "KeyboardInterrupt (result.json: failed)"
                outcomes.append(self._outcome(p, status, error))
                if finished and not (watcher and p.index in watcher.reported):
                    progress.done(p.index, p.label, status, quiet=in_process)
        return results

    def _collect(
        self,
        point: Point,
        ret: Any,
        launch_error: BaseException | None,
        point_dir: Path,
        before: tuple | None,
        lost: Lost | None = None,
    ) -> tuple:
        """(status, error) of a launched point: its job's return, else its fresh result.json.

        A point whose job came back with neither (its process died, the launcher failed, the
        scheduler ended its job: ``lost``) gets a failed result.json saying so, so that every
        launched point has a result.
        """
        job_error: BaseException | None = None
        value: Any = None
        if ret is not None:
            try:
                value = ret.return_value
            except Exception as exc:  # the job raised, maybe in another process
                job_error = exc
        if isinstance(value, Outcome):
            return value.status, value.error
        fresh = _fingerprint(point_dir / RESULT_FILE) != before
        result = RunResult.read(point_dir) if fresh else None
        if result is not None:
            err = result.error
            return result.status, (f"{err.type}: {err.message}" if err else None)
        if lost is not None:
            error = ErrorInfo(
                "SlurmJobLost",
                lost.message,
                f"the scheduler ended the job before it wrote a result (cancelled, out of "
                f"memory, node failure, time limit); its logs are in {lost.log_dir}; run the "
                "same command again to re-run only the points that did not finish",
            )
            self._write_record(
                point_dir.parent, point, "failed", error, lost.slurm_job_id, lost.node
            )
            return "failed", f"{error.type}: {error.message}"
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
        self._write_record(point_dir.parent, point, "failed", error)
        return "failed", f"{error.type}: {error.message}"

    # ------------------------------------------------------------------ launchers
    def _in_process_launcher(self) -> bool:
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        return isinstance(self.launcher, BasicLauncher)

    def _batch_size(self, n_points: int, in_process: bool) -> int:
        if in_process:
            return 1
        if self.max_batch_size:
            return max(1, int(self.max_batch_size))
        names = {f"{c.__module__}.{c.__qualname__}" for c in type(self.launcher).__mro__}
        return 1 if names & _LOCAL_LAUNCHERS else max(n_points, 1)

    @staticmethod
    def _job_overrides(point: Point, force_no_reuse: bool) -> list[str]:
        job = list(point.overrides)
        if force_no_reuse:
            job = without_key(job, "sweep.reuse_model")
            job.append("sweep.reuse_model=false")
        return job + [f"hydra.sweep.subdir={point.index}"]

    @contextlib.contextmanager
    def _quiet_basic_launcher(self) -> Iterator[None]:
        """Hide BasicLauncher's "Launching 1 jobs locally" lines: the progress line says it all."""
        logger = logging.getLogger(_BASIC_LAUNCHER_LOGGER)
        quiet = _DropInfo()
        logger.addFilter(quiet)
        try:
            yield
        finally:
            logger.removeFilter(quiet)

    # ------------------------------------------------------------------ records
    @staticmethod
    def _outcome(point: Point, status: str, error: str | None = None) -> Outcome:
        return Outcome(
            status=status,
            overrides=list(point.overrides),
            index=point.index,
            label=point.label,
            error=error,
        )

    @staticmethod
    def _write_record(
        sweep_dir: Path,
        point: Point,
        status: str,
        error: ErrorInfo,
        slurm_job_id: str | None = None,
        node: str | None = None,
    ) -> None:
        """A result.json written for the sweeper (skipped, or a job that left none)."""
        point_dir = sweep_dir / str(point.index)
        overrides_file = point_dir / ".hydra" / "overrides.yaml"
        if not overrides_file.exists():
            atomic_write_text(
                overrides_file, "".join(f"- {json.dumps(o)}\n" for o in point.overrides)
            )
        record = RunResult(
            status=status,
            error=error,
            config_hash=point.config_hash,
            overrides=list(point.overrides),
            sweep=read_position(sweep_dir, point.index),
        )
        record.lifecycle.slurm_job_id, record.lifecycle.node = slurm_job_id, node
        record.write(point_dir)

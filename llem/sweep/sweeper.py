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
Whatever the batch, each point's directory is its grid index.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict

from llem.config.schema import SweepOrder
from llem.errors import EXIT_CONFIG, ConfigError, first_line
from llem.result import (
    RESULT_FILE,
    atomic_write_json,
    atomic_write_text,
    read_result,
    skeleton,
    utc_now,
    write_result,
)
from llem.sweep.plan import Plan, Point, make_plan, short_label, swept_keys
from llem.sweep.progress import Progress, ResultWatcher, summary_lines

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
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


@dataclass
class _Settings:
    dry_run: bool
    order: SweepOrder
    seed: int
    reuse_model: bool


def _fingerprint(path: Path) -> Optional[tuple]:
    """Identity of a file version (atomic writes replace the inode), None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class _DropInfo(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.INFO


if TYPE_CHECKING:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper as _SweeperBase
else:
    _SweeperBase = object


class LlemSweeperMixin(_SweeperBase):
    """llem's sweep logic, mixed into Hydra's BasicSweeper by ``hydra_plugins.llem_sweeper``.

    A mixin rather than a subclass: Hydra's plugin scan re-executes its core plugin modules, so a
    class defined here on top of ``BasicSweeper`` would keep a stale base whenever this module was
    imported before the scan (a test, a script calling ``llem.main.main``). The plugin module is
    re-executed by the same scan, so the class it defines always has the current ``BasicSweeper``.
    Everything here only uses BasicSweeper's attributes (``config``, ``launcher``,
    ``hydra_context``, ``max_batch_size``) and helpers (``_parse_config``, ``split_arguments``).
    """

    max_batch_size: Optional[int] = None

    _swept: List[str] = []
    _dry_run = False
    _has_cuda = False

    # ------------------------------------------------------------------ planning
    def _compose(self, index: int, overrides: List[str]) -> DictConfig:
        """The job config of one grid point; a Hydra error becomes a one-line ConfigError."""
        from llem.main import condense_hydra_error

        assert self.hydra_context is not None and self.config is not None
        try:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        except Exception as exc:
            text = str(exc)
            if exc.__cause__ is not None and str(exc.__cause__) not in text:
                text += "\n" + str(exc.__cause__)
            label = short_label(list(overrides), self._swept)
            raise ConfigError(
                f"grid point #{index} [{label}]: {condense_hydra_error(text)}",
                hint="fix the command line; nothing was run",
            ) from exc
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg

    def _settings(self, overrides: List[str]) -> _Settings:
        cfg = self._compose(0, overrides)
        order = cfg.sweep.order
        return _Settings(
            dry_run=bool(cfg.dry_run),
            order=order if isinstance(order, SweepOrder) else SweepOrder(str(order)),
            seed=int(cfg.sweep.seed),
            reuse_model=bool(cfg.sweep.reuse_model),
        )

    def _analyse(self, index: int, overrides: List[str]) -> Point:
        from llem.backends import get_backend
        from llem.config.validate import config_hash
        from llem.preflight import resolve_device
        from llem.run import prepare

        point = Point(index=index, overrides=list(overrides))
        cfg = self._compose(index, overrides)  # composition errors stop the whole sweep
        try:
            exp = prepare(cfg)
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
            from llem.preflight import collect_problems

            point.preflight = collect_problems(exp, self._has_cuda)
        return point

    # ------------------------------------------------------------------ the sweep
    def sweep(self, arguments: List[str]) -> Any:
        from llem.main import STATE
        from llem.preflight import cuda_available

        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        params = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        batches = self.split_arguments(parser.parse_overrides(params), None)
        jobs = [list(job) for batch in batches for job in batch] or [[]]
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        STATE.update(multirun=True, sweep_dir=str(sweep_dir), sweep_outcomes=[])

        self._swept = swept_keys(jobs) if len(jobs) > 1 else []
        try:
            settings = self._settings(jobs[0])
            self._dry_run = settings.dry_run
            self._has_cuda = cuda_available()
            plan = make_plan(jobs, self._analyse, sweep_dir, settings.order, settings.seed)
        except ConfigError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            if exc.hint:
                print(f"hint: {exc.hint}", file=sys.stderr)
            raise SystemExit(EXIT_CONFIG) from None

        in_process = self._in_process_launcher()
        reuse = settings.reuse_model and in_process  # other launchers: a process per point
        batch_size = self._batch_size(len(plan.run_order), in_process)

        if settings.dry_run:
            for line in plan.describe(reuse):
                print(line)
            STATE["dry_run_preflight_failed"] = any(p.preflight for p in plan.points)
            return []

        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        self._write_plan(sweep_dir, plan, reuse, batch_size)
        for p in plan.skipped:
            self._write_record(
                sweep_dir,
                p,
                "skipped",
                {
                    "type": "ConfigError",
                    "message": p.reason,
                    "hint": "this combination is invalid; the rest of the sweep ran",
                },
            )
        log.info(plan.short(reuse))
        for p in plan.skipped:
            log.info("  skipped #%d [%s]: %s", p.index, p.label, p.reason)

        outcomes: List[Dict[str, Any]] = STATE["sweep_outcomes"]
        outcomes += [self._outcome(p, "skipped", p.reason) for p in plan.skipped]
        outcomes += [self._outcome(p, "done") for p in plan.done]
        force_no_reuse = settings.reuse_model and not in_process
        progress = Progress(len(plan.run_order))
        returns: List[Any] = []
        interrupted = False
        try:
            for start in range(0, len(plan.run_order), batch_size):
                chunk = plan.run_order[start : start + batch_size]
                returns.extend(
                    self._launch(
                        plan, chunk, sweep_dir, progress, outcomes, in_process, force_no_reuse
                    )
                )
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            if in_process:
                from llem.sweep import reuse as reuse_mod

                reuse_mod.release_all()  # the last point's model, kept for a next point
            if interrupted:  # the interrupted job left its own logging in place
                from hydra.core.utils import configure_log

                configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
            launched = {o["index"] for o in outcomes}
            not_run = sum(1 for i in plan.run_order if i not in launched)
            for line in summary_lines(outcomes, progress.elapsed_s, not_run, interrupted):
                log.info(line)
        return returns

    def _launch(
        self,
        plan: Plan,
        chunk: List[int],
        sweep_dir: Path,
        progress: Progress,
        outcomes: List[Dict[str, Any]],
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
        results: Sequence[Any] = []
        launch_error: Optional[BaseException] = None
        finished = False
        try:
            with self._quiet_basic_launcher(), watcher or contextlib.nullcontext():
                try:
                    results = self.launcher.launch(jobs, initial_job_idx=initial_job_idx)
                except Exception as exc:  # the launcher failed: a worker died, sbatch refused...
                    launch_error = exc
                    log.error("the launcher failed: %s: %s", type(exc).__name__, first_line(exc))
            finished = True
        finally:
            for k, p in enumerate(points):
                ret = results[k] if k < len(results) else None
                if finished:
                    status, error = self._collect(
                        p, ret, launch_error, dirs[p.index], before[p.index]
                    )
                else:  # interrupted: whatever run.py wrote (failed, KeyboardInterrupt) stands
                    fresh = _fingerprint(dirs[p.index] / RESULT_FILE) != before[p.index]
                    if not fresh:
                        continue
                    status, error = "interrupted", "KeyboardInterrupt (result.json: failed)"
                self._annotate(dirs[p.index], before[p.index], plan, p)
                outcomes.append(self._outcome(p, status, error))
                if finished and not (watcher and p.index in watcher.reported):
                    progress.done(p.index, p.label, status, quiet=in_process)
        return results

    def _collect(
        self,
        point: Point,
        ret: Any,
        launch_error: Optional[BaseException],
        point_dir: Path,
        before: Optional[tuple],
    ) -> tuple:
        """(status, error) of a launched point: its job's return, else its fresh result.json.

        A point whose job came back with neither (its process died, the launcher failed) gets a
        failed result.json saying so, so that every launched point has a result.
        """
        job_error: Optional[BaseException] = None
        value: Any = None
        if ret is not None:
            try:
                value = ret.return_value
            except Exception as exc:  # the job raised, maybe in another process
                job_error = exc
        if isinstance(value, dict) and value.get("status"):
            return value["status"], value.get("error")
        fresh = _fingerprint(point_dir / RESULT_FILE) != before
        result = read_result(point_dir) if fresh else None
        if result is not None:
            err = result.get("error") or {}
            message = f"{err.get('type')}: {err.get('message')}" if err else None
            return str(result.get("status")), message
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
        error = {
            "type": type(cause).__name__ if cause else "NoResult",
            "message": first_line(cause) if cause else "the job returned without writing a result",
            "hint": hint,
        }
        self._write_record(point_dir.parent, point, "failed", error)
        return "failed", f"{error['type']}: {error['message']}"

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
    def _job_overrides(point: Point, force_no_reuse: bool) -> List[str]:
        job = list(point.overrides)
        if force_no_reuse:
            job = [o for o in job if o.split("=", 1)[0].lstrip("+~") != "sweep.reuse_model"]
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
    def _outcome(point: Point, status: str, error: Optional[str] = None) -> Dict[str, Any]:
        return {
            "index": point.index,
            "status": status,
            "overrides": point.overrides,
            "label": point.label,
            "error": error,
        }

    @staticmethod
    def _sweep_info(plan: Plan, point: Point) -> Dict[str, Any]:
        return {
            "grid_index": point.index,
            "position": plan.position(point.index),
            "of": len(plan.run_order),
            "order": plan.order.value,
            "seed": plan.seed,
        }

    def _annotate(self, point_dir: Path, before: Optional[tuple], plan: Plan, point: Point) -> None:
        """Add the point's place in the run order to its fresh result.json (``sweep`` section)."""
        if _fingerprint(point_dir / RESULT_FILE) == before:
            return
        result = read_result(point_dir)
        if result is None:
            return
        result["sweep"] = self._sweep_info(plan, point)
        write_result(point_dir, result)

    @staticmethod
    def _write_plan(sweep_dir: Path, plan: Plan, reuse: bool, batch_size: int) -> None:
        atomic_write_json(
            sweep_dir / "sweep_plan.json",
            {
                "written_at": utc_now(),
                "order": plan.order.value,
                "seed": plan.seed,
                "reuse_model": reuse,
                "batch_size": batch_size,
                "swept": plan.swept,
                "run_order": plan.run_order,
                "model_loads": plan.model_loads(reuse),
                "points": [
                    {
                        "index": p.index,
                        "overrides": p.overrides,
                        "status": p.status,
                        "position": plan.position(p.index),
                        "reason": p.reason,
                        "config_hash": p.config_hash,
                        "repeat": p.repeat,
                    }
                    for p in plan.points
                ],
            },
        )

    @staticmethod
    def _write_record(sweep_dir: Path, point: Point, status: str, error: Dict[str, Any]) -> None:
        """A result.json written by the sweeper itself (skipped, or a job that left none)."""
        point_dir = sweep_dir / str(point.index)
        overrides_file = point_dir / ".hydra" / "overrides.yaml"
        if not overrides_file.exists():
            atomic_write_text(
                overrides_file, "".join(f"- {json.dumps(o)}\n" for o in point.overrides)
            )
        record = skeleton(
            status=status,
            config_hash=point.config_hash,
            overrides=point.overrides,
            started_at=utc_now(),
        )
        record["error"] = error
        write_result(point_dir, record)

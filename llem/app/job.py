"""The body of every Hydra job: one run, or one point of a sweep.

A single run raises whatever stops it (``llem.app.boundary.guard`` reports it, once Hydra has
returned). In a sweep, a point's failure is recorded in its result.json and in its outcome, and
the sweep goes on.
"""

from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from llem.app.command import Command
from llem.app.run_log import record_failure, to_file
from llem.config.config_hash import config_hash
from llem.errors import ConfigError, LlemError, PreflightError, first_line
from llem.result import ErrorInfo, RunResult, SweepPosition, write_unmeasured
from llem.runner import prepare, summary_line
from llem.sweep.outcomes import JobOutcome
from llem.sweep.plan_file import read_position
from llem.tracking.probe import check_tracker

log = logging.getLogger("llem")


def run_task(cfg: DictConfig, command: Command) -> JobOutcome:
    """One job under Hydra (its config, output directory and overrides come from Hydra)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    command.task_started = True
    hc = HydraConfig.get()
    command.runner.hydra = _plain(hc)  # its launcher sets the threads (llem.runner.threads)
    multirun = hc.mode == RunMode.MULTIRUN
    command.multirun = command.multirun or multirun
    run_dir = Path(hc.runtime.output_dir)
    outcome = JobOutcome(status="ok", overrides=list(hc.overrides.task), run_dir=run_dir)
    command.job_outcomes.append(outcome)
    if multirun:
        sweep = _sweep_position(str(hc.sweep.dir), str(hc.sweep.subdir))
        _sweep_point(cfg, command, outcome, sweep)
    else:
        _single_run(cfg, command, outcome)
    return outcome


def _plain(node: Any) -> dict[str, Any] | None:
    """Hydra's own config node as plain data (None for anything else)."""
    from omegaconf import OmegaConf

    if not OmegaConf.is_config(node):
        return None
    data = OmegaConf.to_container(node, resolve=False)
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else None


def _discard_run_dir(run_dir: Path) -> None:
    """Remove a run directory that holds no result (a config or pre-flight error stopped it, or
    a dry run), and the folders above it inside the working directory that it leaves empty
    (``outputs/<date>``, ``outputs``)."""
    if not run_dir.is_dir() or (run_dir / "result.json").exists():
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    here, run_dir = Path.cwd().resolve(), run_dir.resolve()
    for folder in run_dir.parents:
        if folder == here or here not in folder.parents:
            return
        try:
            folder.rmdir()
        except OSError:  # not empty: it holds other runs
            return


def _hash_or_none(cfg: DictConfig) -> str | None:
    """The config hash of a point that stopped before running (None if it is not valid)."""
    try:
        return config_hash(prepare(cfg).exp)
    except LlemError:
        return None


def _sweep_position(sweep_dir: str, subdir: str) -> SweepPosition | None:
    """This job's place in llem's sweep plan (None for a sweep llem's sweeper did not plan)."""
    try:
        index = int(subdir)
    except ValueError:
        return None
    return read_position(Path(sweep_dir), index)


def _print_result(result: RunResult, run_dir: Path, said: set[str] | None = None) -> None:
    if result.status == "dry_run":
        print(
            f"dry run: configuration valid, pre-flight passed (device {result.device}); "
            "nothing loaded"
        )
    else:
        print(summary_line(result, run_dir, said))


def _single_run(cfg: DictConfig, command: Command, outcome: JobOutcome) -> None:
    run_dir = outcome.run_dir
    assert run_dir is not None
    try:
        prepared = prepare(cfg)  # a configuration error (exit 2) is said before the tracker's
        if not prepared.exp.dry_run:
            check_tracker(prepared.exp.tracking)  # before any model loads (exit 3)
        result = command.runner.run(prepared, run_dir, outcome.overrides)
    except Exception as exc:
        # Handed to the entrypoint to raise once Hydra has returned: raised through Hydra, it
        # would print its own "Error executing job" line first. The terminal gets it from there;
        # the run's llem.log gets it here (with the traceback of an unexpected one).
        record_failure(run_dir, exc)
        if isinstance(exc, (ConfigError, PreflightError)):
            _discard_run_dir(run_dir)
        outcome.status, outcome.error = "failed", first_line(exc)
        command.error = exc
        return
    _print_result(result, run_dir)
    if result.status == "dry_run":
        _discard_run_dir(run_dir)
    outcome.status = result.status


def _sweep_point(
    cfg: DictConfig, command: Command, outcome: JobOutcome, sweep: SweepPosition | None
) -> None:
    run_dir = outcome.run_dir
    assert run_dir is not None
    overrides = outcome.overrides
    reuse = bool(cfg.sweep.reuse_model)
    try:
        result = command.runner.run(cfg, run_dir, overrides, reuse_model=reuse, sweep=sweep)
    except (ConfigError, PreflightError) as exc:
        # Planning has already skipped invalid combinations: an error here is a failed point.
        _log_error(run_dir, exc)
        if not (run_dir / "result.json").exists():  # keep a result the run already wrote
            _failed_record(cfg, run_dir, exc, overrides, sweep)
        outcome.status, outcome.error = "failed", exc.message
    except LlemError as exc:
        _log_error(run_dir, exc)
        outcome.status, outcome.error = "failed", exc.message
    except Exception as exc:
        log.exception("unexpected error")
        print(f"error: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        outcome.status, outcome.error = "failed", f"{type(exc).__name__}: {first_line(exc)}"
    else:
        _print_result(result, run_dir, command.said)
        outcome.status = result.status


def _log_error(run_dir: Path, exc: LlemError) -> None:
    """A sweep point's error on the console and in its llem.log, its hint in the log alone."""
    log.error("%s", exc.message)
    if exc.hint:
        to_file(run_dir, f"hint: {exc.hint}")


def _failed_record(
    cfg: DictConfig, run_dir: Path, exc: Any, overrides: list[str], sweep: SweepPosition | None
) -> None:
    write_unmeasured(
        run_dir,
        status="failed",
        error=ErrorInfo(type(exc).__name__, exc.message, exc.hint),
        config_hash=_hash_or_none(cfg),
        overrides=overrides,
        sweep=sweep,
    )

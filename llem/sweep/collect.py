"""How each launched point of a sweep ended: its job's return, else the result.json its job
wrote (told apart from an older one by ``fingerprint``), else a failed result.json written here
saying why (the process died, the launcher failed, SLURM lost the job: ``collect``). A point that
never ran gets its record from ``write_point_record``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llem.atomic import atomic_write_text
from llem.errors import first_line
from llem.result import RESULT_FILE, ErrorInfo, RunResult, write_unmeasured
from llem.sweep.outcomes import JobOutcome
from llem.sweep.plan import Point
from llem.sweep.plan_file import read_position
from llem.sweep.watchdog import Lost

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn

log = logging.getLogger("llem.sweep")


def fingerprint(path: Path) -> tuple | None:
    """Identity of a file version (atomic writes replace the inode), None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def point_outcome(point: Point, status: str, error: str | None = None) -> JobOutcome:
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

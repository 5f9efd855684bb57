"""Asking SLURM about jobs: ``squeue`` (what the controller knows of a job) and ``scancel``."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from llem.sweep.unstartable import NodeRequest, parse_request

log = logging.getLogger("llem.sweep")

# Job states in which a job may still write its result (everything else: it has ended).
ACTIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
    "RESV_DEL_HOLD",
    "PREEMPTED",
}


@dataclass
class JobInfo:
    """One line of ``squeue``: a job (or an array task) as the controller sees it."""

    job_id: str  # as squeue and submitit name it (12_3 for array task 3 of job 12)
    slurm_job_id: str  # the unique id (SLURM_JOB_ID inside the job)
    state: str
    reason: str
    node: str
    elapsed_s: float | None
    limit_s: float | None
    request: NodeRequest | None = None  # what it asks of a node (for a pending job's prospects)


def slurm_seconds(text: str) -> float | None:
    """squeue's ``[days-]hours:minutes:seconds`` (or ``minutes:seconds``) → seconds."""
    text = text.strip()
    if not text or not text[0].isdigit():
        return None  # UNLIMITED, INVALID, NOT_SET
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError:
        return None
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts[-3:]
    return float(days * 86400 + h * 3600 + m * 60 + s)


# id, job id, state, reason, node, elapsed, time limit; what it asks: partition, CPUs, memory, TRES
SQUEUE_FORMAT = "%i|%A|%T|%r|%N|%M|%l|%P|%C|%m|%b"


def parse_squeue(text: str) -> dict[str, JobInfo]:
    jobs: dict[str, JobInfo] = {}
    for line in text.splitlines():
        fields = [f.strip() for f in line.strip().split("|")]
        if len(fields) not in (7, 11):
            continue
        job_id, raw, state, reason, node, elapsed, limit = fields[:7]
        jobs[job_id] = JobInfo(
            job_id=job_id,
            slurm_job_id=raw,
            state=state.split()[0].rstrip("+") if state else "",
            reason=reason,
            node=node,
            elapsed_s=slurm_seconds(elapsed),
            limit_s=slurm_seconds(limit),
            request=parse_request(*fields[7:]) if len(fields) == 11 else None,
        )
    return jobs


def squeue(array_ids: Sequence[str], timeout_s: float = 30.0) -> dict[str, JobInfo] | None:
    """Every task of the given jobs that the controller still knows; None when squeue failed.

    An id the controller has forgotten makes squeue exit 1 with "Invalid job id": that is an
    answer (the job is not in the queue), not a failure.
    """
    cmd = ["squeue", "--array", "-t", "all", "-h", "-j", ",".join(array_ids), "-o", SQUEUE_FORMAT]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("squeue failed: %s", exc)
        return None
    if proc.returncode != 0:
        if "invalid job id" in proc.stderr.lower():
            return {}
        log.debug("squeue exited %d: %s", proc.returncode, proc.stderr.strip())
        return None
    return parse_squeue(proc.stdout)


def scancel(job_id: str) -> None:
    try:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:  # pragma: no cover
        log.warning("scancel %s failed: %s", job_id, exc)

"""The CPU threads torch runs a point with: chosen, set before the model loads, and recorded.

torch takes its thread count from ``OMP_NUM_THREADS`` when it is imported, and launchers set that
variable for their own reasons: joblib's (loky) workers get ``OMP_NUM_THREADS=1``, which left torch
on one core of two although llem runs one point at a time. So llem chooses the count itself:

- the engine's threads knob (its row's ``threads_knob``: ``pytorch.num_threads``) when it is given;
- otherwise the CPUs this process may use (its affinity; under SLURM at most the job's
  ``SLURM_CPUS_PER_TASK``) divided by the points the launcher runs at once on this host:
  1 for the in-process launcher and for SLURM (each job has its own CPUs); for joblib and
  ``submitit_local`` the points handed to the launcher at once (``hydra.sweeper.max_batch_size``,
  1 by default), and for joblib at most its ``hydra.launcher.n_jobs``.

The inter-op pool gets the same count where torch still allows it (only once per process, before
any parallel work); otherwise it stays as it is. Both counts, as torch reports them afterwards, go
into ``hardware.torch_threads`` and ``hardware.torch_interop_threads``. An engine whose row has no
threads knob runs its own threads (vLLM's engine, in its own processes): both are null there,
with the reason its row gives.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llem.config.engines import active_engine, value_of
from llem.config.schema import ExperimentConfig
from llem.result import RunResult

log = logging.getLogger("llem.run")

_JOBLIB = "JoblibLauncher"
_SUBMITIT_LOCAL = "submitit_launcher.LocalLauncher"


@dataclass(frozen=True)
class Threads:
    """What torch ran a point with (None, with ``null_reason``, where llem does not set it)."""

    intra_op: int | None
    inter_op: int | None
    null_reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def record(self, result: RunResult) -> None:
        """Into ``hardware.torch_threads`` / ``hardware.torch_interop_threads``."""
        result.hardware.torch_threads = self.intra_op
        result.hardware.torch_interop_threads = self.inter_op
        for key in ("hardware.torch_threads", "hardware.torch_interop_threads"):
            if self.null_reason:
                result.null_reasons[key] = self.null_reason
            else:
                result.null_reasons.pop(key, None)


def usable_cpus(environ: Mapping[str, str] | None = None) -> int:
    """The CPUs this process may run on (affinity, cgroup cpusets); under SLURM at most the
    job's ``SLURM_CPUS_PER_TASK``."""
    environ = os.environ if environ is None else environ
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    slurm = environ.get("SLURM_CPUS_PER_TASK", "")
    if slurm.isdigit() and 0 < int(slurm) < n:
        n = int(slurm)
    return max(n, 1)


def points_at_once(hydra: Mapping[str, Any] | None, cpus: int) -> tuple[int, str]:
    """How many points the launcher runs at once on this host, and the launcher's name.

    ``hydra`` is the job's ``hydra`` config node (None outside Hydra: one run in this process).
    """
    if not hydra:
        return 1, "in-process"
    launcher = hydra.get("launcher") or {}
    target = str(launcher.get("_target_") or "")
    name = str((hydra.get("runtime") or {}).get("choices", {}).get("hydra/launcher") or target)
    local = target.endswith(_JOBLIB) or target.endswith(_SUBMITIT_LOCAL)
    if not local:  # in-process, or a cluster launcher giving each job its own CPUs
        return 1, name
    sweeper = hydra.get("sweeper") or {}
    batch = sweeper.get("max_batch_size")
    if not batch and "llem" in str(sweeper.get("_target_") or ""):
        batch = 1  # llem's sweeper hands local launchers one point at a time by default
    if target.endswith(_JOBLIB):
        jobs = _joblib_jobs(launcher.get("n_jobs"), cpus)
        batch = min(int(batch), jobs) if batch else jobs
    return max(int(batch or 1), 1), name


def _joblib_jobs(n_jobs: Any, cpus: int) -> int:
    """joblib's own reading of ``n_jobs``: -1 every CPU, -2 all but one, None 1."""
    if n_jobs is None or int(n_jobs) == 0:
        return 1
    n = int(n_jobs)
    return max(cpus + 1 + n, 1) if n < 0 else n


def choose_threads(num_threads: int | None, cpus: int, at_once: int) -> int:
    """The threads knob's value (``pytorch.num_threads``), else this process's share of CPUs."""
    if num_threads:
        return int(num_threads)
    return max(cpus // max(at_once, 1), 1)


def settle_threads(exp: ExperimentConfig, hydra: Mapping[str, Any] | None = None) -> Threads:
    """Choose and set torch's threads for this run (see the module doc); what torch then uses."""
    row = active_engine(exp)
    if row.threads_knob is None:  # the engine runs its own threads (its row says why)
        return Threads(None, None, row.threads_reason)
    cpus = usable_cpus()
    at_once, launcher = points_at_once(hydra, cpus)
    given = value_of(exp, row.threads_knob)
    n = choose_threads(given, cpus, at_once)
    if given:
        why = f"{row.threads_knob}={n}"
    else:
        point = "point" if at_once == 1 else "points"
        why = f"{cpus} usable CPUs / {at_once} {point} at a time, {launcher} launcher"
    return _apply(n, why)


def _apply(n: int, why: str) -> Threads:
    import torch

    before = _environment_threads()
    torch.set_num_threads(n)
    notes = []
    if before != n:
        omp = os.environ.get("OMP_NUM_THREADS")
        given = f"OMP_NUM_THREADS={omp}" if omp else "torch's default"
        notes.append(f"torch threads: {n} ({why}); {given} would have given {before}")
        log.info("%s", notes[-1])
    if torch.get_num_interop_threads() != n:
        try:
            torch.set_num_interop_threads(n)
        except RuntimeError:  # once per process, and only before any inter-op work
            log.info(
                "torch inter-op threads stay at %d: torch sets them once per process, before "
                "parallel work (recorded as hardware.torch_interop_threads)",
                torch.get_num_interop_threads(),
            )
    return Threads(torch.get_num_threads(), torch.get_num_interop_threads(), notes=notes)


_ENVIRONMENT_THREADS: list[int] = []  # torch's count as the environment set it, read once


def _environment_threads() -> int:
    """torch's intra-op threads as this process started with them (``OMP_NUM_THREADS`` or
    torch's default), read before llem first sets them: a property of the process, not a run."""
    if not _ENVIRONMENT_THREADS:
        import torch

        _ENVIRONMENT_THREADS.append(torch.get_num_threads())
    return _ENVIRONMENT_THREADS[0]

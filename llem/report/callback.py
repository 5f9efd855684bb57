"""Build the report at the end of every ``--multirun``.

Registered in ``llem/conf/config.yaml``::

    hydra:
      callbacks:
        report:
          _target_: llem.report.callback.ReportCallback

A report failure is logged and never fails the sweep: every run's result.json is already on disk,
and ``python -m llem.report <sweep dir>`` rebuilds the report later.

When a sweep whose points run in this process (Hydra's default launcher) starts, a report worker
(``llem.report.worker``) is started so that the report's imports overlap the sweep's planning;
every job starts only once the worker has finished them and waits, using no CPU, so nothing of the
report runs beside a point's measured window. When the sweep ends, the worker builds the report.
Launchers that run points in other processes get no early worker (it would run beside their
points): the report is built in this process at the end, as it is where no worker could be started
or it failed, with the same output (``worker: false`` turns the worker off).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from llem.report.worker import ReportWorker, WorkerReply
from llem.sweep.launch import in_process

log = logging.getLogger(__name__)

# Seconds a job waits for the worker's imports before the worker is ended (the report is then
# built in this process): they take a second or two, more on a busy machine.
READY_TIMEOUT_S = 120.0


class ReportCallback(Callback):
    """Writes results.csv, results.parquet, summary.csv and plots/ into the sweep directory."""

    def __init__(self, plots: bool = True, print_table: bool = True, worker: bool = True) -> None:
        self.plots = plots
        self.print_table = print_table
        self.worker = worker
        self._worker: ReportWorker | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Launchers that run jobs elsewhere (submitit, joblib) pickle the Hydra context this
        callback belongs to: the worker, a process of this one, stays here."""
        return {**self.__dict__, "_worker": None}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.worker and not config.get("dry_run") and in_process(config):
            self._worker = ReportWorker.start()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A job of an in-process sweep runs here only once the worker waits for its own job."""
        worker = self._worker
        if worker is not None and not worker.wait_ready(READY_TIMEOUT_S):
            log.debug("the report worker was not ready; the report is built in this process")
            worker.kill()
            self._worker = None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        worker, self._worker = self._worker, None
        if config.get("dry_run"):
            if worker is not None:
                worker.close()
            return  # a dry run writes no results, so there is nothing to report
        sweep_dir: Any = None
        try:
            sweep_dir = Path(str(config.hydra.sweep.dir))
            answer = worker.build(sweep_dir, self.plots) if worker is not None else None
            if answer is None:
                answer = _build_here(sweep_dir, self.plots)
            if answer.error_type is not None:
                raise _WorkerError(f"{answer.error_type}: {answer.error}")
            if self.print_table:
                print(answer.text, flush=True)
            log.info("report written to %s (%d files)", answer.out_dir, answer.files)
        except Exception as exc:  # never fail the sweep over its report
            kind = "" if isinstance(exc, _WorkerError) else f"{type(exc).__name__}: "
            log.warning(
                "could not build the report for %s: %s%s (rebuild it with "
                "`python -m llem.report %s`)",
                sweep_dir,
                kind,
                exc,
                sweep_dir or "<sweep dir>",
                exc_info=log.isEnabledFor(logging.DEBUG),
            )


class _WorkerError(Exception):
    """The worker's report failed; its message already names the error's type."""


def _build_here(sweep_dir: Path, plots: bool) -> WorkerReply:
    from llem.report.build import build_report

    report = build_report([sweep_dir], plots=plots)
    return WorkerReply(text=report.text, out_dir=str(report.out_dir), files=len(report.files))

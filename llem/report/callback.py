"""Build the report at the end of every ``--multirun``.

Registered in ``llem/conf/config.yaml``::

    hydra:
      callbacks:
        report:
          _target_: llem.report.callback.ReportCallback

A report failure is logged and never fails the sweep: every run's result.json is already on disk,
and ``python -m llem.report <sweep dir>`` rebuilds the report later.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


class ReportCallback(Callback):
    """Writes results.csv, results.parquet, summary.csv and plots/ into the sweep directory."""

    def __init__(self, plots: bool = True, print_table: bool = True) -> None:
        self.plots = plots
        self.print_table = print_table

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if config.get("dry_run"):
            return  # a dry run writes no results, so there is nothing to report
        sweep_dir: Any = None
        try:
            sweep_dir = Path(str(config.hydra.sweep.dir))
            from llem.report.build import build_report

            report = build_report([sweep_dir], plots=self.plots)
            if self.print_table:
                print(report.text, flush=True)
            log.info("report written to %s (%d files)", report.out_dir, len(report.files))
        except Exception as exc:  # never fail the sweep over its report
            log.warning(
                "could not build the report for %s: %s: %s (rebuild it with "
                "`python -m llem.report %s`)",
                sweep_dir,
                type(exc).__name__,
                exc,
                sweep_dir or "<sweep dir>",
                exc_info=log.isEnabledFor(logging.DEBUG),
            )

"""The tracker's Hydra callback: a run, or a sweep's points, logged after their windows.

Registered in ``llem/conf/config.yaml`` before the report (Hydra calls the end hooks in reverse,
so the sweep's end is logged once its report and summary.csv are written); it does nothing unless
``+tracking=mlflow`` or ``+tracking=wandb`` selects a tracker, and never imports one before. It
calls the tracker only through ``llem.tracking.tracker.Tracker``. A point of a sweep that
runs in this process is logged in ``on_job_end``, after its result.json is written and before the
next point starts, so nothing of the tracker runs inside a measured window; points run by other
launchers (joblib, SLURM, whose nodes may not reach the tracker) are logged by the sweep's own
process at its end. Whether the tracker can be used at all is checked once before the run or the
sweep starts (``llem.tracking.probe``: exit 3 when it cannot); a failure after that (tracker down,
slow, refusing) is said once, with the command that logs the directory later; the sweep goes on
and never fails for it. A run that left no result.json (stopped before it measured) is not logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from llem.sweep.launch import in_process

log = logging.getLogger("llem.tracking")


def _tracking(config: DictConfig) -> Any:
    """The config's tracking section when a tracker is selected and this is no dry run."""
    t = OmegaConf.select(config, "tracking", default=None)
    if t is None or str(t.kind) in ("none", "TrackerKind.none") or config.get("dry_run"):
        return None
    return t


class TrackingCallback(Callback):
    """Logs to the tracker ``tracking.kind`` names (MLflow, W&B); inert when it names none."""

    def __init__(self) -> None:
        self._tracker: Any = None  # the Tracker of this sweep, made at its first logged point
        self._failed: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Launchers that pickle the Hydra context get no client (it is made where it logs)."""
        return {**self.__dict__, "_tracker": None}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._tracker, self._failed = None, None

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        t = _tracking(config)
        if t is None or self._failed is not None:
            return
        run_dir = Path(str(config.hydra.runtime.output_dir))
        if not (run_dir / "result.json").is_file():
            return  # stopped before anything was measured (a refused config or tracker)
        if str(config.hydra.mode) in ("RunMode.RUN", "RUN"):
            self._guard(t, run_dir, lambda: self._of(t).log_single(run_dir))
        elif in_process(config):
            sweep_dir = Path(str(config.hydra.sweep.dir))
            self._guard(t, sweep_dir, lambda: self._of(t).log_point(sweep_dir, run_dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        t = _tracking(config)
        if t is None or self._failed is not None:
            return
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if not sweep_dir.is_dir():
            return
        self._guard(t, sweep_dir, lambda: self._end(t, sweep_dir))

    def _end(self, t: Any, sweep_dir: Path) -> None:
        tracker = self._of(t)
        _, total = tracker.end_sweep(sweep_dir)
        log.info("tracking: %d point(s) of the sweep in %s", total, tracker.where)

    def _of(self, t: Any) -> Any:
        from llem.tracking.make import tracker_for

        if self._tracker is None:
            self._tracker = tracker_for(t)
        return self._tracker

    def _guard(self, t: Any, directory: Path, step: Callable[[], Any]) -> None:
        """Run ``step``; its first failure is said once and ends tracking for this sweep."""
        try:
            step()
        except Exception as exc:  # a tracker never fails a point
            self._failed = f"{type(exc).__name__}: {_first_line(exc)}"
            where, later = _where_and_later(t, self._tracker, directory)
            log.warning(
                "tracking: %s failed (%s); the run goes on without it. Log it later with `%s`",
                where,
                self._failed,
                later,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )


def _where_and_later(t: Any, tracker: Any, directory: Path) -> tuple[str, str]:
    """Where the tracker logs and the command that logs ``directory`` later, also when the
    tracker could not even be made."""
    if tracker is not None:
        return str(tracker.where), str(tracker.later(directory))
    if "wandb" in str(t.kind):
        return (
            f"W&B project {t.project}",
            f"llem-report --to-wandb {directory} --project {t.project}",
        )
    return (
        f"MLflow at {t.uri}",
        f"llem-report --to-mlflow {directory} --tracking-uri {t.uri} --experiment {t.experiment}",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""

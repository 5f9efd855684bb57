"""The one module that imports MLflow: runs created, logged and ended through ``MlflowClient``.

Every request is synchronous, with no retries and a short timeout (``tracking.timeout_s``), so a
tracker that is down costs a point at most one timeout; MLflow's telemetry is switched off (its
thread would send usage data during a measured window). Credentials are MLflow's own business:
it reads ``MLFLOW_TRACKING_TOKEN`` or ``MLFLOW_TRACKING_USERNAME``/``PASSWORD`` from the
environment; nothing here sees them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from llem.tracking.point_files import TimelinePoint
from llem.tracking.state import TrackedRun

T = TypeVar("T")

# MLflow's limits per log_batch call
_PARAMS_TAGS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000

# a point's run: its index in the sweep, and which result of it was logged
POINT_TAG = "llem.point"
STARTED_TAG = "llem.started_at"


def client_settings(timeout_s: float) -> None:
    """No retries, one timeout per request, no telemetry: for every client made after this."""
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, math.ceil(timeout_s)))
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
    os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"  # llem says where, once


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class ExperimentRefused(Exception):
    """The server answered, but ``tracking.experiment`` cannot be logged to (deleted, or a name
    it refuses to create); the message is the reason."""


class MlflowRuns:
    """One experiment of one tracking server (created when absent)."""

    def __init__(self, uri: str | None, experiment: str, timeout_s: float) -> None:
        client_settings(timeout_s)
        from mlflow import MlflowClient

        self.client: Any = MlflowClient(tracking_uri=uri)
        self.uri = str(self.client.tracking_uri)
        self.experiment = experiment
        found = self.client.get_experiment_by_name(experiment)  # the server answers, or raises
        if found is not None and found.lifecycle_stage != "active":
            raise ExperimentRefused(
                f"experiment {experiment!r} (id {found.experiment_id}) is in the "
                f"'{found.lifecycle_stage}' state and MLflow logs only to an 'active' one; "
                f"restore it (mlflow experiments restore --experiment-id {found.experiment_id})"
            )
        try:
            self.experiment_id = str(
                found.experiment_id
                if found is not None
                else self.client.create_experiment(experiment)
            )
        except Exception as exc:  # a name the server refuses: its own reason
            lines = str(exc).strip().splitlines()
            raise ExperimentRefused(lines[0][:300] if lines else type(exc).__name__) from exc

    def tracked(self, run_id: str) -> TrackedRun:
        """What a directory keeps of ``run_id`` (``tracking.json``)."""
        return TrackedRun(self.uri, self.experiment, self.experiment_id, run_id)

    def exists(self, run_id: str) -> bool:
        """Whether ``run_id`` is a live run of this experiment (not deleted)."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            return False
        return bool(
            run.info.experiment_id == self.experiment_id and run.info.lifecycle_stage == "active"
        )

    def create(self, name: str, tags: dict[str, str], parent_id: str | None = None) -> str:
        all_tags = {**tags, **({"mlflow.parentRunId": parent_id} if parent_id else {})}
        run = self.client.create_run(self.experiment_id, run_name=name, tags=all_tags)
        return str(run.info.run_id)

    def reopen(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    def children(self, parent_id: str) -> dict[str, tuple[str, str]]:
        """The parent's child runs by point: ``{point: (run id, started_at logged)}``."""
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{parent_id}'",
            max_results=50000,
        )
        return {
            r.data.tags[POINT_TAG]: (r.info.run_id, r.data.tags.get(STARTED_TAG, ""))
            for r in runs
            if POINT_TAG in r.data.tags
        }

    def logged(self, run_id: str) -> tuple[dict[str, str], dict[str, str]]:
        """The run's parameters and tags as they are now."""
        data = self.client.get_run(run_id).data
        return dict(data.params), dict(data.tags)

    def drop_tags(self, run_id: str, keys: Sequence[str]) -> None:
        for key in keys:
            self.client.delete_tag(run_id, key)

    def log(
        self, run_id: str, metrics: dict[str, float], params: dict[str, str], tags: dict[str, str]
    ) -> None:
        """Metrics (step 0, now), parameters and tags, in batches of MLflow's limits."""
        from mlflow.entities import Metric, Param, RunTag

        now_ms = int(time.time() * 1000)
        ms = [Metric(k, v, now_ms, 0) for k, v in metrics.items()]
        for batch in _chunks(ms, _METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=list(batch))
        ps = [Param(k, v) for k, v in params.items()]
        for batch in _chunks(ps, _PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, params=list(batch))
        ts = [RunTag(k, v) for k, v in tags.items()]
        for batch in _chunks(ts, _PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(run_id, tags=list(batch))

    def history(self, run_id: str, points: Sequence[TimelinePoint]) -> None:
        """A metric history: each point at its step (ms since the window's start), stamped now,
        so a re-run's history is told apart from the one logged before it."""
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)
        ms = [Metric(p.key, p.value, now_ms, p.step_ms) for p in points]
        for batch in _chunks(ms, _METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=list(batch))

    def artifact(self, run_id: str, path: Path, under: str | None = None) -> None:
        """A file or a folder, as the run's artifact (under ``under``)."""
        if path.is_dir():
            self.client.log_artifacts(run_id, str(path), under)
        else:
            self.client.log_artifact(run_id, str(path), under)

    def end(self, run_id: str, status: str) -> None:
        """FINISHED, FAILED or KILLED."""
        self.client.set_terminated(run_id, status)

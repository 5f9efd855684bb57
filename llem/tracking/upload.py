"""A run directory or a sweep directory, logged to a tracker from its files on disk.

The same code logs a point right after its window (``llem.tracking.callback``), the points the
sweep could not log at its end, and a finished sweep later (``llem-report --to-mlflow DIR``,
for compute nodes that cannot reach the tracker), all through ``tracker.MlflowTracker``. A sweep
is a parent run (its swept keys and plan; its plan, report and summary.csv as artifacts; a
search's best configuration as tags and search.json) with a child run per point (its figures, its
timeline as a metric history, result.json, requests.jsonl and plots/: ``point_files``); a point
whose result is logged already is not logged again, and a point re-run since updates its own
child.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llem.result import RESULT_FILE
from llem.sweep.plan_file import PLAN_FILE
from llem.sweep.search_file import SEARCH_FILE
from llem.tracking import figures, point_files
from llem.tracking.mlflow_runs import POINT_TAG, STARTED_TAG, MlflowRuns
from llem.tracking.state import read_state, write_state
from llem.tracking.tracker import result_dirs

if TYPE_CHECKING:
    from llem.plain import Json

# the sweep's own files, logged as the parent's artifacts when present
SWEEP_ARTIFACTS = (PLAN_FILE, SEARCH_FILE, "multirun.yaml", "summary.csv", "results.csv", "plots")
_STATUS = {"ok": "FINISHED", "failed": "FAILED", "skipped": "KILLED"}


def _read_json(path: Path) -> dict[str, Json]:
    data = json.loads(path.read_text())
    return data if isinstance(data, dict) else {}


def _log_result(runs: MlflowRuns, run_id: str, run_dir: Path, result: dict[str, Json]) -> None:
    """One result's metrics, parameters (those not logged yet), tags, its timeline and its
    throughput as metric histories (an absent throughput history's reason a ``null.`` tag), and
    its files: result.json, requests.jsonl and plots/ where it has them. A run logged before
    (a point re-run since) loses the ``null.`` tags of figures this result has."""
    logged, had = runs.logged(run_id)
    params = {k: v for k, v in figures.params(result).items() if k not in logged}
    history = point_files.histories(run_dir, result)
    tags = {**figures.tags(result), **figures.null_tags(history.null_reasons)}
    runs.drop_tags(run_id, [k for k in had if k.startswith("null.") and k not in tags])
    runs.log(run_id, figures.metrics(result), params, tags)
    runs.history(run_id, history.points)
    for path in point_files.artifacts(run_dir):
        runs.artifact(run_id, path, path.name if path.is_dir() else None)
    runs.end(run_id, _STATUS.get(str(result.get("status")), "FINISHED"))


def log_single(runs: MlflowRuns, run_dir: Path) -> bool:
    """A single run's directory as one run; False when it was logged already."""
    result = _read_json(run_dir / RESULT_FILE)
    state = read_state(run_dir)
    if state is not None and runs.exists(state.run_id):
        run_id = state.run_id
        if runs.client.get_run(run_id).data.tags.get(STARTED_TAG) == result.get("started_at"):
            return False
    else:
        run_id = runs.create(run_dir.name, {"llem.run_dir": run_dir.name})
        write_state(run_dir, runs.tracked(run_id))
    _log_result(runs, run_id, run_dir, result)
    return True


class SweepLog:
    """One sweep directory's parent run and its children, logged as the points finish."""

    def __init__(self, runs: MlflowRuns, sweep_dir: Path) -> None:
        self.runs = runs
        self.sweep_dir = sweep_dir
        self.parent_id = self._parent()
        self.logged = runs.children(self.parent_id)

    def _plan(self) -> dict[str, Any]:
        try:
            return _read_json(self.sweep_dir / PLAN_FILE)
        except (OSError, ValueError):
            return {}

    def _parent(self) -> str:
        """The parent run kept in the sweep directory (reopened), else a new one."""
        state = read_state(self.sweep_dir)
        if state is not None and self.runs.exists(state.run_id):
            self.runs.reopen(state.run_id)
            return state.run_id
        name = "/".join(self.sweep_dir.resolve().parts[-2:])
        run_id = self.runs.create(name, {"llem.sweep_dir": name, "llem.kind": "sweep"})
        plan = self._plan()
        params = {
            "swept": ",".join(plan.get("swept") or []),
            "points": str(len(plan.get("points") or [])),
            "order": str(plan.get("order")),
        }
        self.runs.log(run_id, {}, params, {})
        write_state(self.sweep_dir, self.runs.tracked(run_id))
        return run_id

    def _label(self, index: str, result: dict[str, Json]) -> str:
        swept = self._plan().get("swept") or []
        given = result.get("overrides")
        overrides = [str(o) for o in given] if isinstance(given, list) else []
        pairs = [o for o in overrides if o.split("=")[0].lstrip("+~") in swept]
        return f"#{index} " + " ".join(pairs) if pairs else f"#{index}"

    def log_point(self, point_dir: Path) -> bool:
        """The point's child run; False when this result of it is logged already."""
        index = point_dir.name
        result = _read_json(point_dir / RESULT_FILE)
        started = str(result.get("started_at"))
        known = self.logged.get(index)
        if known is not None and known[1] == started:
            return False
        if known is not None:  # re-run since it was logged: its own child is updated
            run_id = known[0]
            self.runs.reopen(run_id)
        else:
            tags = {POINT_TAG: index, "llem.kind": "point"}
            run_id = self.runs.create(self._label(index, result), tags, self.parent_id)
        _log_result(self.runs, run_id, point_dir, result)
        self.logged[index] = (run_id, started)
        return True

    def log_pending(self) -> int:
        """Every point with a result that is not logged yet; how many were logged."""
        return sum(self.log_point(d) for d in result_dirs(self.sweep_dir))

    def finish(self) -> None:
        """The sweep's files as the parent's artifacts, a search's best as its tags; the
        parent ends."""
        best = point_files.search_best(self.sweep_dir)
        if best is not None:
            self.runs.log(self.parent_id, {}, {}, best)
        for name in SWEEP_ARTIFACTS:
            path = self.sweep_dir / name
            if path.exists():
                self.runs.artifact(self.parent_id, path, "plots" if name == "plots" else None)
        self.runs.end(self.parent_id, "FINISHED")


class MlflowTracker:
    """MLflow's parent run per sweep and child per point (``llem.tracking.upload``)."""

    def __init__(self, uri: str | None, experiment: str, timeout_s: float) -> None:
        self.runs = MlflowRuns(uri, experiment, timeout_s)
        self.where = f"MLflow at {self.runs.uri}"
        self._sweeps: dict[Path, SweepLog] = {}

    def _sweep(self, sweep_dir: Path) -> SweepLog:
        if sweep_dir not in self._sweeps:
            self._sweeps[sweep_dir] = SweepLog(self.runs, sweep_dir)
        return self._sweeps[sweep_dir]

    def log_single(self, run_dir: Path) -> bool:
        return log_single(self.runs, run_dir)

    def log_point(self, sweep_dir: Path, point_dir: Path) -> bool:
        return bool(self._sweep(sweep_dir).log_point(point_dir))

    def end_sweep(self, sweep_dir: Path) -> tuple[int, int]:
        sweep = self._sweep(sweep_dir)
        n = sweep.log_pending()
        sweep.finish()
        return n, len(sweep.logged)

    def later(self, directory: Path) -> str:
        return (
            f"llem-report --to-mlflow {directory} --tracking-uri {self.runs.uri} "
            f"--experiment {self.runs.experiment}"
        )

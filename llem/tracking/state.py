"""``tracking.json``: which tracker runs a directory was logged to, kept beside its results.

One section per tracker: ``mlflow`` (the parent's or the single run's id, so a resumed sweep or
a later ``llem-report --to-mlflow`` continues the same run) and ``wandb`` (the group, the sweep
run's id and each point's run id with the result it holds and the last history step the run
holds, ``[run id, started_at, step ms]``: W&B's offline mode has no server to ask). Writing one
section keeps the others. Nothing secret is written: the URI (refused with a password in it),
names and ids.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llem.atomic import atomic_write_text

STATE_FILE = "tracking.json"
_FIELDS = ("uri", "experiment", "experiment_id", "run_id")


@dataclass(frozen=True)
class TrackedRun:
    """The run a directory was logged to: where, in which experiment (name and id), its id."""

    uri: str
    experiment: str
    experiment_id: str
    run_id: str


def _read_all(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_section(directory: Path, tracker: str) -> dict[str, Any]:
    """The section of ``tracker`` (``mlflow``, ``wandb``); empty when there is none."""
    section = _read_all(directory).get(tracker)
    return section if isinstance(section, dict) else {}


def write_section(directory: Path, tracker: str, section: dict[str, Any]) -> None:
    """The section of ``tracker`` replaced, the other trackers' sections kept."""
    data = {**_read_all(directory), tracker: section}
    atomic_write_text(directory / STATE_FILE, json.dumps(data, indent=2) + "\n")


def read_state(directory: Path) -> TrackedRun | None:
    """The MLflow run ``directory`` was logged to, None when it was not (or is unreadable)."""
    data = read_section(directory, "mlflow")
    try:
        return TrackedRun(**{k: str(data[k]) for k in _FIELDS})
    except KeyError:
        return None


def write_state(directory: Path, run: TrackedRun) -> None:
    write_section(directory, "mlflow", asdict(run))

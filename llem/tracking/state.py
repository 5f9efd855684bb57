"""``tracking.json``: which tracker runs a directory was logged to, kept beside its results.

A sweep directory keeps its parent run's id, so a resumed sweep (or a later ``llem-report
--to-mlflow``) continues the same parent; a single run's directory keeps its run's id. Nothing
secret is written: the URI (refused with a password in it) and the ids.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

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


def read_state(directory: Path) -> TrackedRun | None:
    """The run ``directory`` was logged to, None when it was not (or the file is unreadable)."""
    try:
        data = json.loads((directory / STATE_FILE).read_text())["mlflow"]
        return TrackedRun(**{k: str(data[k]) for k in _FIELDS})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(directory: Path, run: TrackedRun) -> None:
    atomic_write_text(directory / STATE_FILE, json.dumps({"mlflow": asdict(run)}, indent=2) + "\n")

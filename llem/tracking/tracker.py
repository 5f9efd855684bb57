"""The one interface the callback and ``llem-report --to-...`` call, whichever tracker is chosen.

A tracker logs a single run's directory, one point of a sweep, and a sweep's end (its points not
logged yet, then its own files); it says where it logs and the command that logs a directory
later. ``llem.tracking.make.tracker_for`` makes the one ``tracking.kind`` names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from llem.result import RESULT_FILE


class Tracker(Protocol):
    where: str  # e.g. "MLflow at http://127.0.0.1:5000", said in its lines

    def log_single(self, run_dir: Path) -> bool:
        """A single run's directory as one run; False when this result is logged already."""
        ...

    def log_point(self, sweep_dir: Path, point_dir: Path) -> bool:
        """One point of the sweep; False when this result of it is logged already."""
        ...

    def end_sweep(self, sweep_dir: Path) -> tuple[int, int]:
        """The points not logged yet, then the sweep's own files; (points logged now, total)."""
        ...

    def later(self, directory: Path) -> str:
        """The command that logs ``directory`` later."""
        ...


def result_dirs(sweep_dir: Path) -> list[Path]:
    """The sweep's point folders that hold a result, in grid order."""
    dirs = [d for d in sweep_dir.iterdir() if d.name.isdigit() and d.is_dir()]
    return [d for d in sorted(dirs, key=lambda d: int(d.name)) if (d / RESULT_FILE).is_file()]


def upload(tracker: Tracker, directory: Path) -> str:
    """``llem-report --to-...``: a sweep or a single run's directory; one line saying what was
    logged where."""
    if (directory / RESULT_FILE).is_file():
        new = tracker.log_single(directory)
        return f"{'logged' if new else 'already logged'}: {directory} to {tracker.where}"
    n, total = tracker.end_sweep(directory)
    return f"logged {n} point(s) of {directory} to {tracker.where}; {total - n} were logged already"

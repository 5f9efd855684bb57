"""Find the run directories a report covers.

A run directory is any directory holding ``result.json``, or ``.hydra/`` without being a sweep's
root: a single run (``outputs/YYYY-MM-DD/HH-MM-SS/``), a grid point of a sweep (``<sweep>/N/``), or
anything below a directory passed on the command line (several sweeps, a whole
``outputs/multirun/`` day).

A sweep's report shows the points of its current plan only. A sweep directory that holds a plan
(``sweep_plan.json``, written when the sweep starts) may also hold point directories of an older
grid that a re-run with another grid did not use (the plan had fewer points): they are left out
of the runs and listed apart (:attr:`Found.outside_plan`), never shown beside the new grid's
points. ``superseded/`` (older contents moved aside) is never read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from llem.errors import EXIT_CONFIG, LlemError
from llem.sweep.plan_file import plan_indices
from llem.sweep.superseded import SUPERSEDED_DIR

_SKIP_DIRS = {".hydra", "plots", "__pycache__", ".git", SUPERSEDED_DIR, ".relocating"}


class ReportError(LlemError):
    """The report cannot be built from what was given (no runs, not a directory): exit 2."""

    exit_code = EXIT_CONFIG


@dataclass
class Found:
    """Run directories, in a stable natural order, and those left out as not in their sweep's
    plan."""

    runs: list[Path] = field(default_factory=list)
    outside_plan: list[Path] = field(default_factory=list)


def is_run_dir(path: Path) -> bool:
    if (path / "result.json").is_file():
        return True
    # a sweep's root holds multirun.yaml; its points, and single runs, hold .hydra/
    return (path / ".hydra").is_dir() and not (path / "multirun.yaml").is_file()


def find_run_dirs(root: Path) -> list[Path]:
    """Run directories at or below ``root``, in a stable, natural order (2 before 10); a sweep's
    point directories that are not in its plan are left out."""
    return _find(Path(root), Found()).runs


def _find(root: Path, found: Found) -> Found:
    if is_run_dir(root):
        found.runs.append(root)
        return found
    try:
        children = sorted((p for p in root.iterdir() if p.is_dir()), key=_natural_key)
    except OSError:
        return found
    planned = plan_indices(root)
    for child in children:
        if child.name in _SKIP_DIRS:
            continue
        if planned is not None and child.name.isdigit() and int(child.name) not in planned:
            if is_run_dir(child):
                found.outside_plan.append(child)
            continue
        _find(child, found)
    return found


def _natural_key(path: Path) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.name))


def run_dirs(roots: Sequence[Path]) -> Found:
    """Every run directory under ``roots``, each once; ReportError when there is none."""
    for root in roots:
        if not root.exists():
            raise ReportError(f"{root} does not exist")
        if not root.is_dir():
            raise ReportError(f"{root} is not a directory")
    out = Found()
    seen: set[Path] = set()
    for root in roots:
        found = _find(root, Found())
        for p in found.runs:
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.runs.append(p)
        out.outside_plan += [p for p in found.outside_plan if p not in out.outside_plan]
    if not out.runs:
        where = ", ".join(str(r) for r in roots)
        raise ReportError(
            f"no runs found in {where}",
            hint="pass a sweep directory (outputs/multirun/DATE/TIME) or a run directory "
            "(outputs/DATE/TIME) that holds result.json",
        )
    return out


def as_given(path: Path | str, roots: Sequence[Path]) -> Path:
    """``path`` (absolute, as results.csv's ``run_dir`` has it) written from the report's
    directory it lies under, as that directory was named (``run1/timeseries.csv`` for
    ``llem-report run1``), so that the paths a report prints are written alike; ``path`` itself
    where it lies under none of ``roots``."""
    path = Path(path)
    for root in roots:
        if path.is_relative_to(root.resolve()):
            return root / path.relative_to(root.resolve())
    return path

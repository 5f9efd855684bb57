"""A sweep's mistake that every point shares stops it before any point runs, in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from filelock import FileLock

from llem.sweep.lock import LOCK_FILE
from llem.testing import forked_cli

from .conftest import NO_REPORT, output

pytestmark = pytest.mark.slow  # each test runs python -m llem

MISSING = ["dataset=jsonl", "dataset.path=missing.jsonl"]


def run_llem(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return forked_cli.run_llem(*args, multirun=True, cwd=cwd, timeout=120)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_pre_flight_problem_every_point_shares_stops_the_sweep_in_one_line(
    tmp_path: Path,
) -> None:
    """As a single run: exit 3 and the problem once; no point runs, nothing is written."""
    sweep = tmp_path / "multirun" / "sweep"
    proc = run_llem(*MISSING, "pytorch.batch_size=1,2", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert proc.returncode == 3, output(proc)
    assert _lines(proc.stderr) == [
        "error: 1 pre-flight check failed: dataset.path=missing.jsonl does not exist (looked "
        f"for {tmp_path / 'missing.jsonl'})",
        "hint: all 2 points of the sweep share it; nothing was run or written",
    ], output(proc)
    assert proc.stdout == "", output(proc)
    assert not (tmp_path / "multirun").exists()  # not even the folder the lock would need


def test_in_a_sweep_directory_that_exists_nothing_is_moved_or_written(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "0" / "notes.txt").write_text("an older attempt")
    proc = run_llem(*MISSING, "pytorch.batch_size=1,2", f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert proc.returncode == 3, output(proc)
    assert _lines(proc.stderr)[0].startswith("error: 1 pre-flight check failed: dataset.path=")
    assert sorted(p.name for p in sweep.iterdir()) == sorted(["0", LOCK_FILE]), output(proc)
    assert (sweep / "0" / "notes.txt").read_text() == "an older attempt"


def test_a_busy_sweep_directory_is_refused_before_any_point_is_composed(tmp_path: Path) -> None:
    """The second point's mistake (exit 2) is not even reached: the busy directory comes first."""
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    with FileLock(str(sweep / LOCK_FILE), timeout=0):
        proc = run_llem(
            "pytorch.batch_size=1,four", NO_REPORT, f"hydra.sweep.dir={sweep}", cwd=tmp_path
        )
    assert proc.returncode == 3, output(proc)
    assert _lines(proc.stderr) == [
        f"error: another llem sweep is running in {sweep}: wait for it to finish, "
        "or give this one another hydra.sweep.dir"
    ], output(proc)

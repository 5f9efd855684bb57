"""A sweep directory's point directories: which finished results they hold, and settling them.

A point is identified by its index in Hydra's grid order, which is also its directory name. A
re-run into the same sweep directory finds finished work by configuration, not by index: an ok
result whose config hash and repeat match a point counts for that point wherever it sits (adding
a value to a grid shifts indices), and is moved to the point's directory. Whatever else sits in a
directory a point will use is moved aside to ``superseded/`` first, so that nothing older is ever
presented as a new point's result; the log says so in one line per directory moved. Point
directories beyond this grid (an older, larger grid's) stay where they are: the log names them,
and the report leaves them out (it shows the points of the plan only).
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from llem.result import RunResult
from llem.sweep.plan import Point
from llem.sweep.superseded import supersede, supersede_stamp


def point_dirs(sweep_dir: Path) -> dict[int, Path]:
    """The sweep directory's point directories (named by a number) by that number."""
    found: dict[int, Path] = {}
    if sweep_dir.is_dir():
        for d in sweep_dir.iterdir():
            if d.is_dir() and d.name.isdigit():
                found[int(d.name)] = d
    return found


def _finished_key(result: RunResult) -> tuple | None:
    if result.status != "ok" or not result.config_hash:
        return None
    return (result.config_hash, int((result.config or {}).get("repeat", 0) or 0))


def mark_done(points: list[Point], sweep_dir: Path) -> None:
    """A point is done when an ok result for its configuration and repeat is in the sweep.

    Its own directory is preferred; otherwise any point directory holding one (``found_at``).
    """
    finished: dict[tuple, list[int]] = {}
    for index, d in sorted(point_dirs(sweep_dir).items()):
        result = RunResult.read(d)
        key = _finished_key(result) if result is not None else None
        if key is not None:
            finished.setdefault(key, []).append(index)
    pending = [p for p in points if p.status == "pending" and p.config_hash]
    for p in sorted(pending, key=lambda p: p.index not in _where(finished, p)):
        where = _where(finished, p)
        if not where:
            continue
        j = p.index if p.index in where else where[0]
        where.remove(j)
        p.status, p.found_at = "done", j


def _where(finished: dict[tuple, list[int]], p: Point) -> list[int]:
    """Where ``p``'s finished results are: by its hash, or by the hash an older llem wrote."""
    return finished.get((p.config_hash, p.repeat)) or finished.get((p.legacy_hash, p.repeat), [])


def settle_directories(points: list[Point], sweep_dir: Path) -> list[str]:
    """Put every finished result in its point's directory and move anything else aside.

    Results found at another index move to their point's directory; whatever else occupies a
    directory that a point of this sweep will use (an older result of another configuration, a
    failed or unfinished attempt) moves to ``superseded/<time>/<index>``. Returns log lines.
    """
    existing = point_dirs(sweep_dir)
    moves: dict[int, int] = {
        p.found_at: p.index
        for p in points
        if p.status == "done" and p.found_at is not None and p.found_at != p.index
    }
    keep = {p.index for p in points if p.status == "done" and p.found_at == p.index}
    lines: list[str] = []
    staging = sweep_dir / ".relocating"
    for j in moves:
        staging.mkdir(exist_ok=True)
        shutil.move(str(existing[j]), str(staging / str(j)))
    stamp = supersede_stamp()
    for p in points:
        d = sweep_dir / str(p.index)
        if p.index in keep or not d.exists():
            continue
        what = _older_contents(d, p.overrides)
        target = supersede(d, p.index, stamp)
        lines.append(f"#{p.index}: {what} moved aside to {target}")
    for j, i in moves.items():
        _renumber(staging / str(j), j, i)
        shutil.move(str(staging / str(j)), str(sweep_dir / str(i)))
        lines.append(f"#{i}: its finished result was in #{j}; moved to #{i} (not re-run)")
    for p in points:
        if p.status == "done" and p.config_hash:
            _rehash(sweep_dir / str(p.index), p.config_hash)
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
    planned = {p.index for p in points}
    extra = sorted(j for j in existing if j not in planned and j not in moves)
    if extra:
        points_ = "points" if len(extra) > 1 else "point"
        lines.append(
            f"{', '.join(f'#{j}' for j in extra)}: an older grid's {points_}, not in this "
            "sweep's plan: left in place and out of its report"
        )
    return lines


def _older_contents(run_dir: Path, overrides: list[str]) -> str:
    """What a point directory about to be moved aside holds, told by the overrides in which it
    differs from the point: 'an older ok result [pytorch.batch_size=3]'."""
    result = RunResult.read(run_dir)
    if result is None:
        return "an unfinished older attempt"
    differs = [o for o in result.overrides if o not in overrides]
    of = f"[{' '.join(differs)}]" if differs else "of this configuration"
    return f"an older {result.status} result {of}"


def _rehash(run_dir: Path, config_hash: str) -> None:
    """Write today's hash into a finished result found by the hash an older llem wrote, so that
    the report pools it with the repeats run now."""
    result = RunResult.read(run_dir)
    if result is not None and result.config_hash != config_hash:
        result.config_hash = config_hash
        result.write(run_dir)


def _renumber(run_dir: Path, old: int, new: int) -> None:
    """Rewrite a moved result's ``sweep`` section for its new index (atomically, through
    RunResult); where it ran in its sweep's run order stays as recorded."""
    result = RunResult.read(run_dir)
    if result is None or result.sweep is None:
        return
    result.sweep = replace(result.sweep, grid_index=new, moved_from=old)
    result.write(run_dir)

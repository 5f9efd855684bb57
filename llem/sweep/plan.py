"""Planning a sweep before any GPU time: validate every point, find finished ones, choose an order.

A point is identified by its index in Hydra's grid order, which is also its directory name. A
re-run into the same sweep directory finds finished work by configuration, not by index: an ok
result whose config hash and repeat match a point counts for that point wherever it sits (adding
a value to a grid shifts indices), and is moved to the point's directory. Whatever else sits in a
directory a point will use is moved aside to ``superseded/`` first, so that nothing older is ever
presented as a new point's result; the log says so in one line per directory moved. Point
directories beyond this grid (an older, larger grid's) stay where they are: the log names them,
and the report leaves them out (it shows the points of the plan only).

``sweep_plan.json`` (owned here) records the plan; each job reads its own position from it when it
writes its result.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import shutil
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llem.atomic import atomic_write_json
from llem.config.schema import SweepOrder
from llem.hydra.overrides import key_of, swept_keys
from llem.result import RunResult, SweepPosition, utc_now
from llem.sweep.load_estimate import estimate_loads, loads_in_order
from llem.sweep.superseded import supersede, supersede_stamp

log = logging.getLogger("llem.sweep")

PLAN_FILE = "sweep_plan.json"


@dataclass
class Point:
    index: int
    overrides: list[str]
    status: str = "pending"  # pending | skipped | done
    reason: str | None = None
    config_hash: str | None = None
    load_key: str | None = None
    repeat: int = 0
    preflight: list[str] = field(default_factory=list)
    label: str = ""  # the swept overrides only (set by make_plan); all of them when nothing varies
    found_at: int | None = None  # done: the directory its finished result was found in
    power_limit_w: float | None = None  # gpu.power_limit_w: orders the points of a group
    launches: bool = False  # its load launches a server (the load time: launch to ready)

    def __post_init__(self) -> None:
        if not self.label:
            self.label = " ".join(self.overrides) or "(defaults)"


def expand_grid(overrides: list[Any]) -> list[list[str]]:
    """Hydra's parsed overrides → one override list per grid point, in Hydra's grid order.

    ``a=1,2 b=x,y`` gives (1,x), (1,y), (2,x), (2,y), exactly as Hydra's basic sweeper does.
    """
    from hydra.errors import HydraException

    axes: OrderedDict[str, list[str]] = OrderedDict()
    for o in overrides:
        key = o.get_key_element()
        if o.is_sweep_override():
            if not o.is_discrete_sweep():
                raise HydraException(f"{key}: only lists, range() and choice() can be swept")
            axes[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
        else:
            axes[key] = [f"{key}={o.get_value_element_as_str()}"]
    return [list(job) for job in itertools.product(*axes.values())]


def short_label(overrides: list[str], keys: list[str]) -> str:
    shown = [o for o in overrides if key_of(o) in keys]
    return " ".join(shown) or " ".join(overrides) or "(defaults)"


@dataclass
class Plan:
    points: list[Point]
    order: SweepOrder
    seed: int
    run_order: list[int]  # indices of the points to run, in the order they will run
    swept: list[str] = field(default_factory=list)  # override keys that vary between points
    load_times: Mapping[str, Sequence[float]] | None = None  # this host's; None: no estimate

    @property
    def skipped(self) -> list[Point]:
        return [p for p in self.points if p.status == "skipped"]

    @property
    def done(self) -> list[Point]:
        return [p for p in self.points if p.status == "done"]

    def loading(self, reuse: bool) -> list[Point]:
        """The points that load a model, in run order (``loads_in_order``)."""
        by_index = {p.index: p for p in self.points}
        return loads_in_order([by_index[i] for i in self.run_order], reuse)

    def model_loads(self, reuse: bool) -> int:
        return len(self.loading(reuse))

    def short(self, reuse: bool) -> str:
        n, loading, times = len(self.points), self.loading(reuse), self.load_times
        estimate = "" if times is None else estimate_loads(loading, times).text()
        return (
            f"sweep plan: {n} point{'s' if n != 1 else ''} · {len(self.skipped)} skipped · "
            f"{len(self.done)} already done · {len(self.run_order)} to run · order "
            f"{self.order.value} · {len(loading)} model load(s)"
            f"{'' if reuse else ' (reuse off)'}{estimate}"
        )

    def position(self, index: int) -> int | None:
        """1-based place of grid point ``index`` in the run order (None: it does not run)."""
        try:
            return self.run_order.index(index) + 1
        except ValueError:
            return None

    def describe(self, reuse: bool) -> list[str]:
        """The dry-run report: every point, skipped ones with their reason, pre-flight results."""
        lines = [self.short(reuse)]
        if self.swept:
            lines.append(f"  swept: {', '.join(self.swept)}")
        for p in self.skipped:
            lines.append(f"  skipped #{p.index} [{p.label}]: {p.reason}")
        for p in self.done:
            lines.append(f"  done    #{p.index} [{p.label}] (result.json ok, same config hash)")
        for pos, i in enumerate(self.run_order, 1):
            p = self.points[i]
            pre = (
                "pre-flight ok"
                if not p.preflight
                else "pre-flight FAILED: " + "; ".join(p.preflight)
            )
            lines.append(f"  {pos:>3}. #{p.index} [{p.label}] {pre}")
        failed = [p for p in self.points if p.preflight]
        lines.append(
            f"dry run: nothing was loaded; {len(failed)} point(s) failed pre-flight"
            if failed
            else "dry run: nothing was loaded; every point to run passed pre-flight"
        )
        return lines


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
    for p in sorted(pending, key=lambda p: p.index not in finished.get(_key(p), [])):
        where = finished.get(_key(p), [])
        if not where:
            continue
        j = p.index if p.index in where else where[0]
        where.remove(j)
        p.status, p.found_at = "done", j


def _key(p: Point) -> tuple:
    return (p.config_hash, p.repeat)


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


def _renumber(run_dir: Path, old: int, new: int) -> None:
    """Rewrite a moved result's ``sweep`` section for its new index (atomically, through
    RunResult); where it ran in its sweep's run order stays as recorded."""
    result = RunResult.read(run_dir)
    if result is None or result.sweep is None:
        return
    result.sweep = replace(result.sweep, grid_index=new, moved_from=old)
    result.write(run_dir)


def write_plan(
    sweep_dir: Path, plan: Plan, reuse: bool, batch_size: int, order: str | None = None
) -> Path:
    """The plan file; ``order`` names an order other than the grid's (a search's)."""
    return atomic_write_json(
        sweep_dir / PLAN_FILE,
        {
            "written_at": utc_now(),
            "order": order or plan.order.value,
            "seed": plan.seed,
            "reuse_model": reuse,
            "batch_size": batch_size,
            "swept": plan.swept,
            "run_order": plan.run_order,
            "model_loads": plan.model_loads(reuse),
            "points": [
                {
                    "index": p.index,
                    "overrides": p.overrides,
                    "status": p.status,
                    "position": plan.position(p.index),
                    "reason": p.reason,
                    "config_hash": p.config_hash,
                    "repeat": p.repeat,
                }
                for p in plan.points
            ],
        },
    )


def read_position(sweep_dir: Path, index: int) -> SweepPosition | None:
    """Grid point ``index``'s place in the plan written to ``sweep_dir`` (None without a plan)."""
    try:
        data = json.loads((sweep_dir / PLAN_FILE).read_text(encoding="utf-8"))
        run_order = list(data["run_order"])
        position = run_order.index(index) + 1 if index in run_order else None
        return SweepPosition(
            grid_index=index,
            position=position,
            of=len(run_order),
            order=str(data["order"]),
            seed=int(data["seed"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def plan_indices(sweep_dir: Path) -> set[int] | None:
    """The grid indices of the plan last written to ``sweep_dir`` (every point: to run, done,
    skipped); None when there is no readable plan (not a sweep, a dry run, an older llem)."""
    try:
        data = json.loads((Path(sweep_dir) / PLAN_FILE).read_text(encoding="utf-8"))
        return {int(p["index"]) for p in data["points"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def order_points(points: list[Point], order: SweepOrder, seed: int) -> list[int]:
    """Indices of the pending points in run order.

    grouped: points sharing a load key run back to back (groups in order of first appearance);
    interleave: repeat rounds one after another (every configuration's repeat 0, then repeat 1,
    ...), grouped by load key within a round, so drift over time spreads evenly across
    configurations;
    shuffle: a seeded random permutation.

    In grouped and interleave orders, a sweep over ``gpu.power_limit_w`` runs each group's points
    in power-limit order, rising in one group and falling in the next (``by_power_limit``), so
    that the GPU steps between neighbouring limits instead of jumping from the highest to the
    lowest between two points.
    """
    pending = [p for p in points if p.status == "pending"]

    def grouped(items: list[Point]) -> list[list[Point]]:
        groups: OrderedDict[str | None, list[Point]] = OrderedDict()
        for p in items:
            groups.setdefault(p.load_key, []).append(p)
        return list(groups.values())

    chosen: list[list[Point]] | None = None
    if order == SweepOrder.grouped:
        chosen = grouped(pending)
    if order == SweepOrder.interleave:
        rounds: dict[int, list[Point]] = {}
        for p in pending:
            rounds.setdefault(p.repeat, []).append(p)
        chosen = [g for r in sorted(rounds) for g in grouped(rounds[r])]
    if chosen is not None:
        return [p.index for members in by_power_limit(chosen) for p in members]
    indices = [p.index for p in pending]
    random.Random(seed).shuffle(indices)
    return indices


def by_power_limit(groups: list[list[Point]]) -> list[list[Point]]:
    """Each group's points in power-limit order (a stable sort: points of one limit keep their
    order), rising in the first group with a power limit, falling in the next, and so on; points
    without a limit (the GPU left as it is) keep their place at the end of their group."""
    out, rising = [], True
    for members in groups:
        limits = [p.power_limit_w for p in members if p.power_limit_w is not None]
        if len(set(limits)) < 2:
            out.append(members)
            continue
        sign = 1.0 if rising else -1.0
        with_limit = sorted(
            (p for p in members if p.power_limit_w is not None),
            key=lambda p: sign * (p.power_limit_w or 0.0),
        )
        out.append(with_limit + [p for p in members if p.power_limit_w is None])
        rising = not rising
    return out


def make_plan(
    jobs: list[list[str]],
    analyse: Callable[[int, list[str]], Point],
    sweep_dir: Path,
    order: SweepOrder,
    seed: int,
    before_reading: Callable[[], object] | None = None,
) -> Plan:
    """Analyse every point, then (after ``before_reading``: the sweep takes its lock) read the
    sweep directory for finished points, and order the rest."""
    points = [analyse(i, overrides) for i, overrides in enumerate(jobs)]
    swept = swept_keys(jobs) if len(jobs) > 1 else []
    for p in points:
        p.label = short_label(p.overrides, swept)
    if before_reading is not None:
        before_reading()
    mark_done(points, sweep_dir)
    return Plan(
        points=points,
        order=order,
        seed=seed,
        run_order=order_points(points, order, seed),
        swept=swept,
    )

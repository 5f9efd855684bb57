"""Planning a sweep before any GPU time: validate every point, find finished ones, choose an order.

A point is identified by its index in Hydra's grid order, which is also its directory name, so a
re-run of the same sweep into the same directory finds each point's earlier result.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from llem.config.schema import SweepOrder
from llem.result import read_result


@dataclass
class Point:
    index: int
    overrides: List[str]
    status: str = "pending"  # pending | skipped | done
    reason: Optional[str] = None
    config_hash: Optional[str] = None
    load_key: Optional[str] = None
    repeat: int = 0
    preflight: List[str] = field(default_factory=list)
    label: str = ""  # the swept overrides only (set by make_plan); all of them when nothing varies

    def __post_init__(self) -> None:
        if not self.label:
            self.label = " ".join(self.overrides) or "(defaults)"


def override_key(override: str) -> str:
    """``+decoder.top_k=5`` → ``decoder.top_k``; ``decoder=greedy`` → ``decoder``."""
    return override.split("=", 1)[0].lstrip("+~")


def swept_keys(jobs: List[List[str]]) -> List[str]:
    """Override keys whose value differs between grid points, in command-line order."""
    values: OrderedDict[str, set] = OrderedDict()
    present: Dict[str, int] = {}
    for job in jobs:
        for key in {override_key(o) for o in job}:
            present[key] = present.get(key, 0) + 1
        for o in job:
            values.setdefault(override_key(o), set()).add(o.partition("=")[2])
    return [k for k, v in values.items() if len(v) > 1 or present[k] < len(jobs)]


def short_label(overrides: List[str], keys: List[str]) -> str:
    shown = [o for o in overrides if override_key(o) in keys]
    return " ".join(shown) or " ".join(overrides) or "(defaults)"


@dataclass
class Plan:
    points: List[Point]
    order: SweepOrder
    seed: int
    run_order: List[int]  # indices of the points to run, in the order they will run
    swept: List[str] = field(default_factory=list)  # override keys that vary between points

    @property
    def skipped(self) -> List[Point]:
        return [p for p in self.points if p.status == "skipped"]

    @property
    def done(self) -> List[Point]:
        return [p for p in self.points if p.status == "done"]

    def model_loads(self, reuse: bool) -> int:
        """How many model loads the run order implies (consecutive equal load keys share one)."""
        loads, previous = 0, None
        by_index = {p.index: p for p in self.points}
        for i in self.run_order:
            key = by_index[i].load_key
            if not reuse or key != previous:
                loads += 1
            previous = key
        return loads

    def short(self, reuse: bool) -> str:
        n = len(self.points)
        return (
            f"sweep plan: {n} point{'s' if n != 1 else ''} · {len(self.skipped)} skipped · "
            f"{len(self.done)} already done · {len(self.run_order)} to run · order "
            f"{self.order.value} · {self.model_loads(reuse)} model load(s)"
            f"{'' if reuse else ' (reuse off)'}"
        )

    def position(self, index: int) -> Optional[int]:
        """1-based place of grid point ``index`` in the run order (None: it does not run)."""
        try:
            return self.run_order.index(index) + 1
        except ValueError:
            return None

    def describe(self, reuse: bool) -> List[str]:
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


def mark_done(points: List[Point], sweep_dir: Path) -> None:
    """Points whose directory already holds an ok result for the same configuration are done."""
    for p in points:
        if p.status != "pending":
            continue
        previous = read_result(sweep_dir / str(p.index))
        if (
            previous
            and previous.get("status") == "ok"
            and previous.get("config_hash") == p.config_hash
        ):
            p.status = "done"


def order_points(points: List[Point], order: SweepOrder, seed: int) -> List[int]:
    """Indices of the pending points in run order.

    grouped: points sharing a load key run back to back (groups in order of first appearance);
    interleave: repeat rounds one after another (every configuration's repeat 0, then repeat 1,
    ...), grouped by load key within a round, so drift over time spreads evenly across
    configurations;
    shuffle: a seeded random permutation.
    """
    pending = [p for p in points if p.status == "pending"]

    def grouped(items: List[Point]) -> List[int]:
        groups: OrderedDict[Optional[str], List[int]] = OrderedDict()
        for p in items:
            groups.setdefault(p.load_key, []).append(p.index)
        return [i for members in groups.values() for i in members]

    if order == SweepOrder.grouped:
        return grouped(pending)
    if order == SweepOrder.interleave:
        rounds: Dict[int, List[Point]] = {}
        for p in pending:
            rounds.setdefault(p.repeat, []).append(p)
        return [i for r in sorted(rounds) for i in grouped(rounds[r])]
    indices = [p.index for p in pending]
    random.Random(seed).shuffle(indices)
    return indices


def make_plan(
    jobs: List[List[str]],
    analyse: Callable[[int, List[str]], Point],
    sweep_dir: Path,
    order: SweepOrder,
    seed: int,
) -> Plan:
    points = [analyse(i, overrides) for i, overrides in enumerate(jobs)]
    swept = swept_keys(jobs) if len(jobs) > 1 else []
    for p in points:
        p.label = short_label(p.overrides, swept)
    mark_done(points, sweep_dir)
    return Plan(
        points=points,
        order=order,
        seed=seed,
        run_order=order_points(points, order, seed),
        swept=swept,
    )

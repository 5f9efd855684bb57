"""``sweep_plan.json`` (owned here) records the plan; each job reads its own position from it when
it writes its result, and the report reads which grid indices the plan holds."""

from __future__ import annotations

import json
from pathlib import Path

from llem.atomic import atomic_write_json
from llem.result import SweepPosition, utc_now
from llem.sweep.plan import Plan

PLAN_FILE = "sweep_plan.json"


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

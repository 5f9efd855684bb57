"""A sweep's plan: its points (one per grid job, identified by their index in Hydra's grid order,
which is also their directory name), what each one's status is, and the dry-run report.

Finished points are found by ``llem.sweep.point_dirs``, ordered by ``llem.sweep.run_order``,
written by ``llem.sweep.plan_file``; ``llem.sweep.planner.make_plan`` makes the plan.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llem.config.schema import SweepOrder
from llem.hydra.overrides import key_of
from llem.sweep.load_estimate import estimate_loads, loads_in_order

if TYPE_CHECKING:
    from hydra.core.override_parser.types import Override


@dataclass
class Point:
    index: int
    overrides: list[str]
    status: str = "pending"  # pending | skipped | done
    reason: str | None = None
    config_hash: str | None = None
    legacy_hash: str | None = None  # the hash an older llem wrote for it (found on resume)
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


def expand_grid(overrides: list[Override]) -> list[list[str]]:
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

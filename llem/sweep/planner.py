"""Planning a sweep: the grid's jobs, the sweep's own settings, and each point composed and checked.

Each point's config is composed (``llem.hydra.compose.points``: each set of group choices once) and
validated before the first model loads; a point that breaks a cross-field rule is marked skipped
with the reason, while a Hydra composition error (bad key, bad type) stops the whole sweep with
exit code 2. A dry run also runs every point's pre-flight checks. The composer keeps what it
composed: an in-process sweep builds each point's whole config from it instead of composing again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from llem.backends import create_backend
from llem.config.config_hash import legacy_config_hash
from llem.config.schema import SweepOrder
from llem.errors import ConfigError
from llem.hydra.compose.points import PointComposer
from llem.hydra.errors import condense_hydra_error, explain_hydra_text, hydra_error_text
from llem.hydra.overrides import parse_grid, swept_keys
from llem.runner import prepare
from llem.runner.preflight import PreflightMemo, collect_problems, resolve_device
from llem.sweep.plan import Plan, Point, expand_grid, short_label
from llem.sweep.point_dirs import mark_done
from llem.sweep.run_order import order_points
from llem.sweep.search_space import Space, make_space

if TYPE_CHECKING:
    from hydra.types import HydraContext


@dataclass
class SweepSettings:
    """The sweep's own knobs (``dry_run``, ``sweep.*``), read from the first point's config."""

    dry_run: bool
    order: SweepOrder
    seed: int
    reuse_model: bool


class Planner:
    """Composes and checks the points of one sweep (one per ``sweep`` call)."""

    def __init__(self, hydra_context: HydraContext, config: DictConfig) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.composer = PointComposer(hydra_context.config_loader, config)
        self.swept: list[str] = []  # the keys whose value differs between points (for labels)
        self.dry_run = False
        self.has_cuda = False
        # every point's pre-flight problems (a dry run's always; a sweep whose points run on
        # this machine's, to refuse a problem they all share before any runs)
        self.check_preflight = False
        self.preflight_memo = PreflightMemo()

    def jobs(self, params: dict[str, str], arguments: list[str]) -> list[list[str]]:
        """Every grid point's overrides (``hydra.sweeper.params`` first, then the command line)."""
        lines = [f"{k}={v}" for k, v in params.items()] + list(arguments)
        try:
            return expand_grid(parse_grid(lines, self.hydra_context.config_loader)) or [[]]
        except Exception as exc:
            raise ConfigError(condense_hydra_error(hydra_error_text(exc))) from None

    def space(self, params: dict[str, str], arguments: list[str]) -> Space:
        """A search's space, from the same sweep expressions as the grid's (``interval()`` too)."""
        lines = [f"{k}={v}" for k, v in params.items()] + list(arguments)
        try:
            parsed = parse_grid(lines, self.hydra_context.config_loader)
        except Exception as exc:
            raise ConfigError(condense_hydra_error(hydra_error_text(exc))) from None
        return make_space(parsed)

    def compose(self, index: int, overrides: list[str]) -> DictConfig:
        """The job config of one grid point; a Hydra error becomes a one-line ConfigError."""
        try:
            return self.composer.compose(list(overrides))
        except Exception as exc:
            raise self._composition_error(index, overrides, exc) from exc

    def _composition_error(self, index: int, overrides: list[str], exc: Exception) -> ConfigError:
        """llem's one line for what Hydra refused, as a single run gets it (an unknown key with
        the closest one, a bad value or group option with the allowed ones); Hydra's own words,
        condensed and naming the grid point, for anything else."""
        text = hydra_error_text(exc)
        explained = explain_hydra_text(text, overrides)
        if explained is None:
            label = short_label(list(overrides), self.swept)
            explained = f"grid point #{index} [{label}]: {condense_hydra_error(text)}"
        return ConfigError(explained, hint="fix the command line; nothing was run")

    def settings(self, overrides: list[str]) -> SweepSettings:
        cfg = self.compose(0, overrides)
        order = cfg.sweep.order
        return SweepSettings(
            dry_run=bool(cfg.dry_run),
            order=order if isinstance(order, SweepOrder) else SweepOrder(str(order)),
            seed=int(cfg.sweep.seed),
            reuse_model=bool(cfg.sweep.reuse_model),
        )

    def analyse(self, index: int, overrides: list[str]) -> Point:
        """One point: skipped with the reason, or its config hash, repeat and load key."""
        point = Point(index=index, overrides=list(overrides))
        cfg = self.compose(index, overrides)  # composition errors stop the whole sweep
        try:
            prepared = prepare(cfg)
        except ConfigError as exc:
            if any(": no such key" in p for p in exc.problems):
                raise  # an unknown key is a typo, not an invalid combination
            point.status, point.reason = "skipped", exc.message
            return point
        exp = prepared.exp
        point.config_hash, point.legacy_hash = prepared.config_hash, legacy_config_hash(exp)
        point.repeat = exp.repeat
        point.power_limit_w = exp.gpu.power_limit_w  # the run order steps through the limits
        device = resolve_device(exp.device, self.has_cuda)
        backend = create_backend(exp)
        point.load_key = backend.load_key(device)
        # its load is a server's launch to ready (the plan's estimate says so)
        point.launches = bool(getattr(backend, "launches_server", False))
        if self.dry_run or self.check_preflight:
            point.preflight = collect_problems(exp, self.has_cuda, self.preflight_memo)
        return point


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

"""llem's search sweeper (``hydra/sweeper=llem_search``): the grid's points, chosen by a sampler.

The space is the grid's sweep expressions plus ``interval()`` (``llem.sweep.search_space``); the
declaration is ``hydra.sweeper.objective``, ``direction``, ``constraints``, ``budget``, ``seed``,
``sampler`` and ``confirm`` (``llem.sweep.search_spec``). Each trial is a point as the grid
sweeper has it: composed and validated before it runs (an invalid combination is recorded as
skipped and counts as an infeasible trial, without running), run through the configured launcher
in ``<sweep dir>/<n>`` with model reuse in-process, and written as its result.json. The search
itself is ``llem.sweep.search.Search``; ``search.json`` (``llem.sweep.search_file``) is rewritten
after every trial.

Before anything runs, an objective or constraint on energy where the device measures none (a CPU
without a replay trace), or on quality where the dataset scores no answer, stops the search with
exit 2. A dry run prints the declaration, the space
and the first point's pre-flight checks.

Resume: the same command again tells the search every finished trial of it in the sweep directory
(``llem.sweep.search_results``); new trials take the lowest free directory numbers, until the
budget is spent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from omegaconf import OmegaConf

from llem.config.schema import SweepOrder
from llem.errors import ConfigError, interrupted_by
from llem.hydra.compose.studies import check_study, record_study
from llem.result import ErrorInfo, RunResult
from llem.runner.preflight import cuda_available
from llem.sweep.collect import point_outcome, write_point_record
from llem.sweep.launch import SweepLaunch, in_process, runs_here
from llem.sweep.lock import SweepLock
from llem.sweep.plan import Plan, Point, short_label
from llem.sweep.plan_file import write_plan
from llem.sweep.planner import Planner
from llem.sweep.point_dirs import point_dirs
from llem.sweep.progress import SweepProgress
from llem.sweep.search import Proposal, Search, import_optuna
from llem.sweep.search_config import drawn_seed, energy_unavailable, quality_unavailable
from llem.sweep.search_results import figure_text, resume, summary, verdict_of
from llem.sweep.search_spec import (
    SearchSpec,
    check_energy,
    check_footprint,
    check_quality,
    make_spec,
)
from llem.sweep.search_verdict import judge
from llem.sweep.sweeper import GridSweeper, GridSweeperConf

log = logging.getLogger("llem.sweep")


@dataclass
class LlemSweeperConf(GridSweeperConf):
    """``hydra/sweeper=llem`` and ``hydra/sweeper=llem_search`` (``search=true``). One set of
    options for both, because a study file cannot change the sweeper (the root config's choice of
    ``llem`` wins over a study's defaults list): a study declares a search by setting
    ``hydra.sweeper.objective``."""

    search: bool = False  # llem_search: the objective must be declared
    # a numeric figure of result.json (llem.result.keys), e.g. energy.j_per_output_token
    objective: str | None = None
    direction: str = "minimize"  # minimize | maximize
    # 'KEY OP NUMBER' each, OP one of <=, >=, <, >: 'latency.tpot_ms.p90 <= 50'
    constraints: list[str] = field(default_factory=list)
    budget: int = 20  # search trials (configurations measured), resumed ones included
    seed: int = 0
    sampler: str = "tpe"  # tpe | gp (needs scipy) | random
    # after the search, measure the best feasible configuration this many times more (the best
    # is chosen on the mean of all its runs; one that a confirmation makes infeasible gives way
    # to the next best, which is confirmed in turn: llem.sweep.search_confirm)
    confirm: int = 0


class SearchSweeper(GridSweeper):
    """The grid sweeper's planning, records, launching and report; a sampler picks the points."""

    def __init__(
        self,
        objective: str | None = None,
        direction: str = "minimize",
        constraints: object = None,
        budget: object = 20,
        seed: object = 0,
        sampler: str = "tpe",
        confirm: object = 0,
        search: bool = False,
        **grid: Any,
    ) -> None:
        super().__init__(**grid)
        self.declared = (objective, direction, constraints, budget, seed, sampler)
        self.confirm = confirm
        self.searching = bool(search) or objective is not None

    def _spec(self) -> tuple[SearchSpec, int]:
        """The declaration checked: the search's spec, and how many confirmations it asks."""
        objective, direction, constraints, budget, seed, sampler = self.declared
        if OmegaConf.is_config(constraints):
            constraints = OmegaConf.to_container(constraints)
        spec = make_spec(objective, direction, constraints, budget, seed, sampler)
        confirm = self.confirm
        if isinstance(confirm, bool) or not isinstance(confirm, int) or confirm < 0:
            raise ConfigError(f"hydra.sweeper.confirm={confirm}: must be a whole number >= 0")
        return spec, confirm

    def sweep(self, arguments: list[str]) -> Any:
        """A search where one is declared (``llem_search``, or an objective); else the grid."""
        if not self.searching:
            return super().sweep(arguments)
        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        self.check_settings()
        spec, confirm = self._spec()
        import_optuna()
        planner = Planner(self.hydra_context, self.config)
        space = planner.space(self.params, arguments)
        if not space.dims:
            raise ConfigError(
                "hydra/sweeper=llem_search: nothing to search (allowed: a sweep expression such "
                "as vllm.max_num_seqs=8,16,32 or gpu.power_limit_w=interval(200,400))"
            )
        planner.swept = space.keys
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        check_study(self.config, self.hydra_context.config_loader)
        first = space.overrides(space.first())
        settings = planner.settings(first)
        planner.dry_run = settings.dry_run
        planner.has_cuda = cuda_available()
        local = in_process(self.config)
        cfg = planner.compose(0, first)
        on_this_machine = local or runs_here(self.launcher)
        # what the config lacks first (a factor of carbon or cost), then what the machine lacks
        check_footprint(
            spec, lambda key: key in space.keys or OmegaConf.select(cfg, key) is not None
        )
        check_energy(spec, energy_unavailable(cfg, planner.has_cuda, on_this_machine))
        check_quality(spec, quality_unavailable(cfg, space.keys))
        search = Search(spec, space, confirm=confirm, traffic_seed=drawn_seed(cfg))
        if settings.dry_run:
            self._started(sweep_dir, None)
            return self._dry_run_search(planner, search, first)
        lock = SweepLock(sweep_dir)
        try:
            self._started(sweep_dir, lock.acquire())
            self._ready(lock)
            return self._search(planner, search, sweep_dir, settings.reuse_model, settings.seed)
        finally:
            if self.listener is None:
                lock.release()

    # ------------------------------------------------------------------ dry run
    def _dry_run_search(
        self, planner: Planner, search: Search, first: list[str]
    ) -> list[JobReturn]:
        point = planner.analyse(0, first)
        size = search.space.size
        print(f"search plan: {search.spec.describe()}")
        print(f"  space: {' '.join(search.space.describe())}")
        print(f"  {size if size is not None else 'continuous'} configurations in the space")
        if search.space.fixed:
            print(f"  every trial: {' '.join(search.space.fixed)}")
        if point.status == "skipped":
            print(f"  first point [{' '.join(first)}]: skipped: {point.reason}")
        else:
            failed = "; ".join(point.preflight)
            pre = f"pre-flight FAILED: {failed}" if failed else "pre-flight ok"
            print(f"  first point [{' '.join(first)}]: {pre}")
        print("dry run: nothing was loaded")
        self._finished([], preflight_failed=bool(point.preflight))
        return []

    # ------------------------------------------------------------------ the search
    def _search(
        self, planner: Planner, search: Search, sweep_dir: Path, reuse: bool, seed: int
    ) -> list[JobReturn]:
        assert self.config is not None and self.hydra_context is not None
        for line in resume(planner, search, sweep_dir):
            log.info("%s", line)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        record_study(sweep_dir, self.config, self.hydra_context.config_loader)
        local = in_process(self.config)
        plan = Plan(points=[], order=SweepOrder.grouped, seed=seed, run_order=[])
        plan.swept = search.space.keys
        self._placeholders(plan, search)
        outcomes = [
            point_outcome(Point(index=int(t.dir), overrides=t.overrides), "done")
            for t in search.record.trials
        ]
        to_run = max(search.spec.budget - search.searched, 0) + search.confirm
        progress = SweepProgress(to_run, already_done=len(outcomes))
        log.info("search: %s", search.spec.describe())
        log.info("  space: %s", " ".join(search.space.describe()))
        launch = self._launch(planner, plan, sweep_dir, progress, outcomes, local, reuse)
        size = 1 if local else max(1, int(self.max_batch_size or 1))
        returns: list[JobReturn] = []
        interrupted = False
        try:
            with self._display(progress):
                returns = self._loop(planner, search, plan, launch, sweep_dir, reuse, size)
            search.record.state = "finished"
        except BaseException as exc:
            interrupted = interrupted_by(exc)
            search.record.state = "interrupted" if interrupted else "stopped"
            search.record.stopped_because = f"{type(exc).__name__}: {exc}".strip()
            raise
        finally:
            search.record.write(sweep_dir)
            for line in summary(search):
                log.info("%s", line)
            self._summary(plan, outcomes, progress, interrupted)
        return returns

    def _placeholders(self, plan: Plan, search: Search) -> None:
        """Plan points for the trials found finished (they keep their directories)."""
        for t in search.record.trials:
            self._place(plan, Point(index=int(t.dir), overrides=t.overrides, status="done"))

    @staticmethod
    def _place(plan: Plan, point: Point) -> None:
        while len(plan.points) <= point.index:
            plan.points.append(Point(index=len(plan.points), overrides=[], status="skipped"))
        plan.points[point.index] = point

    def _loop(
        self,
        planner: Planner,
        search: Search,
        plan: Plan,
        launch: SweepLaunch,
        sweep_dir: Path,
        reuse: bool,
        size: int,
    ) -> list[JobReturn]:
        returns: list[JobReturn] = []
        while True:
            batch = self._next_batch(planner, search, plan, sweep_dir, size)
            if not batch:
                break
            runnable = [(p, point) for p, point in batch if point.status == "pending"]
            for proposal, point in batch:
                if point.status == "skipped":
                    self._skipped(search, proposal, point, sweep_dir, launch)
            if not runnable:
                continue
            # a confirmation that demotes the best adds the next best's to what runs
            progress = launch.progress
            progress.total = max(progress.total, progress.finished + len(runnable))
            plan.run_order.extend(point.index for _, point in runnable)
            write_plan(sweep_dir, plan, reuse, size, order="search")
            try:
                returns.extend(launch.batch([point.index for _, point in runnable]))
            finally:
                for proposal, point in runnable:
                    self._told(search, proposal, point, sweep_dir)
        search.record.stopped_because = search.stop_reason() or (
            "the sampler proposed no configuration that was not measured"
        )
        return returns

    def _next_batch(
        self, planner: Planner, search: Search, plan: Plan, sweep_dir: Path, size: int
    ) -> list[tuple[Proposal, Point]]:
        batch: list[tuple[Proposal, Point]] = []
        while len(batch) < size:
            proposal = search.ask()
            if proposal is None:
                break
            overrides = search.trial_overrides(proposal)
            index = _free_index(plan, sweep_dir)
            point = planner.analyse(index, overrides)
            point.label = short_label(overrides, search.space.keys)
            self._place(plan, point)
            batch.append((proposal, point))
        return batch

    def _skipped(
        self, search: Search, proposal: Proposal, point: Point, sweep_dir: Path, launch: SweepLaunch
    ) -> None:
        reason = point.reason or "invalid combination"
        hint = "this combination is invalid; the search went on"
        write_point_record(sweep_dir, point, "skipped", ErrorInfo("ConfigError", reason, hint))
        verdict = judge(search.spec, {}, lambda key: f"skipped: {reason}")
        search.tell(proposal, str(point.index), verdict, status="skipped")
        launch.outcomes.append(point_outcome(point, "skipped", reason))
        log.info(
            "  search trial %d #%d [%s]: skipped: %s",
            search.searched,
            point.index,
            point.label,
            reason,
        )
        search.record.write(sweep_dir)

    def _told(self, search: Search, proposal: Proposal, point: Point, sweep_dir: Path) -> None:
        result = RunResult.read(sweep_dir / str(point.index))
        if result is None or (result.error and result.error.type == "KeyboardInterrupt"):
            search.abandon(proposal)
            return
        verdict = verdict_of(search.spec, result)
        record = search.tell(
            proposal,
            str(point.index),
            verdict,
            status=result.status,
            config_hash=result.config_hash,
        )
        search.record.write(sweep_dir)
        what = f"{search.spec.objective}={figure_text(record.objective)}"
        judged = "feasible" if record.feasible else f"infeasible: {record.why_not}"
        best = search.record.best_trial()
        best_text = (
            f"#{best.dir} {figure_text(search.record.best_mean)}" if best else "none feasible yet"
        )
        log.info(
            "  %s trial %d #%d [%s]: %s, %s; best so far %s",
            proposal.kind,
            record.number + 1,
            point.index,
            point.label,
            what,
            judged,
            best_text,
        )


def _free_index(plan: Plan, sweep_dir: Path) -> int:
    """The lowest trial directory number that neither this search nor the disk uses."""
    used = {p.index for p in plan.points if p.overrides} | set(point_dirs(sweep_dir))
    i = 0
    while i in used:
        i += 1
    return i

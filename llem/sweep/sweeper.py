"""llem's Hydra sweeper: Hydra's grid syntax (lists, ``range()``, ``choice()``), plus planning.

Before the first model loads it composes and validates every grid point. Points that break a
cross-field rule are written as ``status: skipped`` with the reason; a Hydra composition error (bad
key, bad type) stops everything at once. Finished points are not run again (resume), the rest run in
the configured order, each in ``<sweep dir>/<grid index>``, through whichever Hydra launcher is
configured. ``dry_run=true`` prints the plan and pre-flight results and launches nothing.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict

from llem.config.schema import SweepOrder
from llem.errors import ConfigError
from llem.result import atomic_write_json, atomic_write_text, skeleton, utc_now, write_result
from llem.sweep.plan import Plan, Point, make_plan

log = logging.getLogger("llem.sweep")


@dataclass
class LlemSweeperConf:
    _target_: str = "hydra_plugins.llem_sweeper.llem_sweeper.LlemSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


def _fmt_s(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class LlemSweeper(BasicSweeper):
    """A BasicSweeper that plans the whole grid first (see module docstring)."""

    def _compose(self, overrides: List[str]) -> DictConfig:
        assert self.hydra_context is not None and self.config is not None
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg

    def _analyse(self, index: int, overrides: List[str]) -> Point:
        from llem.backends import get_backend
        from llem.config.validate import config_hash
        from llem.preflight import resolve_device
        from llem.run import prepare

        point = Point(index=index, overrides=list(overrides))
        try:
            cfg = self._compose(overrides)  # Hydra errors propagate: they stop the whole sweep
        except Exception as exc:
            raise ConfigError(
                f"grid point #{index} [{point.label}]: {str(exc).splitlines()[0]}"
            ) from exc
        try:
            exp = prepare(cfg)
        except ConfigError as exc:
            if any(": no such key" in p for p in exc.problems):
                raise  # an unknown key is a typo, not an invalid combination
            point.status, point.reason = "skipped", exc.message
            return point
        point.config_hash = config_hash(exp)
        point.repeat = exp.repeat
        device = resolve_device(exp.device, self._has_cuda)
        point.load_key = get_backend(exp.backend or "pytorch").load_key(exp, device)
        if self._dry_run:
            from llem.preflight import collect_problems

            point.preflight = collect_problems(exp, self._has_cuda)
        return point

    def sweep(self, arguments: List[str]) -> Any:
        from llem.main import STATE
        from llem.preflight import cuda_available

        assert self.config is not None and self.launcher is not None
        assert self.hydra_context is not None
        params = self._parse_config() + list(arguments)
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        batches = self.split_arguments(parser.parse_overrides(params), None)
        jobs = [list(job) for batch in batches for job in batch]
        sweep_dir = Path(self.config.hydra.sweep.dir)

        base = self._compose(jobs[0]) if jobs else None
        self._dry_run = bool(base.dry_run) if base is not None else False
        self._has_cuda = cuda_available()
        order = SweepOrder(base.sweep.order.value if hasattr(base.sweep.order, "value")
                           else base.sweep.order) if base is not None else SweepOrder.grouped
        seed = int(base.sweep.seed) if base is not None else 0
        reuse = bool(base.sweep.reuse_model) if base is not None else True
        if reuse and not self._in_process_launcher():
            reuse = False  # each point runs in its own process: nothing to reuse
        plan = make_plan(jobs, self._analyse, sweep_dir, order, seed)
        STATE.update(multirun=True, sweep_dir=str(sweep_dir), sweep_outcomes=[])

        if self._dry_run:
            for line in plan.describe(reuse):
                print(line)
            failed = [p for p in plan.points if p.preflight]
            STATE["dry_run_preflight_failed"] = bool(failed)
            return []

        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        self._write_plan(sweep_dir, plan, reuse)
        for p in plan.skipped:
            self._write_skipped(sweep_dir, p)
        log.info(plan.short(reuse))
        for p in plan.skipped:
            log.info("skipped #%d [%s]: %s", p.index, p.label, p.reason)

        outcomes: List[Dict[str, Any]] = [
            {"index": p.index, "status": "skipped", "overrides": p.overrides, "error": p.reason}
            for p in plan.skipped
        ] + [{"index": p.index, "status": "done", "overrides": p.overrides} for p in plan.done]
        STATE["sweep_outcomes"] = outcomes
        returns = []
        t0 = time.perf_counter()
        total = len(plan.run_order)
        for k, index in enumerate(plan.run_order):
            point = plan.points[index]
            elapsed = time.perf_counter() - t0
            eta = f" · ETA {_fmt_s(elapsed / k * (total - k))}" if k else ""
            log.info("point %d/%d (#%d) [%s] · elapsed %s%s", k + 1, total, index, point.label,
                     _fmt_s(elapsed), eta)
            job = point.overrides + [f"hydra.sweep.subdir={index}"]
            results = self.launcher.launch([job], initial_job_idx=index)
            returns.append(results)
            for r in results:
                outcomes.append(self._outcome(point, r))
        log.info(self._summary(outcomes, time.perf_counter() - t0))
        for o in outcomes:
            if o["status"] == "failed":
                log.info("  failed #%d [%s]: %s", o["index"], " ".join(o["overrides"]),
                         o.get("error"))
        return returns

    def _in_process_launcher(self) -> bool:
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        return isinstance(self.launcher, BasicLauncher)

    @staticmethod
    def _outcome(point: Point, job_return: Any) -> Dict[str, Any]:
        try:
            value = job_return.return_value
        except Exception as exc:  # the job raised (e.g. in another process)
            return {"index": point.index, "status": "failed", "overrides": point.overrides,
                    "error": f"{type(exc).__name__}: {exc}"}
        value = value if isinstance(value, dict) else {}
        return {"index": point.index, "status": value.get("status", "failed"),
                "overrides": point.overrides, "error": value.get("error")}

    @staticmethod
    def _summary(outcomes: List[Dict[str, Any]], seconds: float) -> str:
        counts: Dict[str, int] = {}
        for o in outcomes:
            counts[o["status"]] = counts.get(o["status"], 0) + 1
        parts = [f"{counts.get(s, 0)} {s}" for s in ("ok", "failed", "skipped")]
        if counts.get("done"):
            parts.append(f"{counts['done']} already done")
        return f"sweep finished in {_fmt_s(seconds)}: " + " · ".join(parts)

    @staticmethod
    def _write_plan(sweep_dir: Path, plan: Plan, reuse: bool) -> None:
        atomic_write_json(sweep_dir / "sweep_plan.json", {
            "written_at": utc_now(),
            "order": plan.order.value,
            "seed": plan.seed,
            "reuse_model": reuse,
            "run_order": plan.run_order,
            "model_loads": plan.model_loads(reuse),
            "points": [
                {"index": p.index, "overrides": p.overrides, "status": p.status,
                 "reason": p.reason, "config_hash": p.config_hash, "repeat": p.repeat}
                for p in plan.points
            ],
        })

    @staticmethod
    def _write_skipped(sweep_dir: Path, point: Point) -> None:
        point_dir = sweep_dir / str(point.index)
        atomic_write_text(point_dir / ".hydra" / "overrides.yaml",
                          "".join(f"- {json.dumps(o)}\n" for o in point.overrides))
        record = skeleton(status="skipped", config_hash=None, overrides=point.overrides,
                          started_at=utc_now())
        record["error"] = {"type": "ConfigError", "message": point.reason,
                           "hint": "this combination is invalid; the rest of the sweep ran"}
        write_result(point_dir, record)

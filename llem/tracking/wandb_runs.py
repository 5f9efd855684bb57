"""The one module that imports wandb: a sweep as a W&B group, a point as one run in it.

A sweep is a group (named after the sweep directory, kept in ``tracking.json``); each point is a
run of job_type ``point`` in it, with its overrides, its composed configuration and its null
figures' reasons as the run's config, every numeric figure of result.json as a summary metric
under its dotted, unit-bearing key (a null figure is no metric, never a 0), its timeline and
the engine's throughput as history at step = ms since the window's start
(``point_files.histories``; an absent throughput history's reason in ``null_reasons``), status
and validity as tags and result.json, requests.jsonl and plots/ as an artifact. The sweep's plan,
summary.csv, plots and a search's search.json go to a run of job_type ``sweep`` in the same group,
with the search's best configuration in its config (``search``). A single run is one run of
job_type ``run``.

Every run is opened, logged and finished after its window, and wandb's service is torn down
before the next point starts, so nothing of wandb runs inside a measured window. Offline
(``tracking.mode=offline`` or ``WANDB_MODE=offline``) writes the runs under ``tracking.dir``
(default: the sweep's or the run's directory) for ``wandb sync``, and touches no network. The
API key is wandb's own business (``WANDB_API_KEY`` or its netrc); nothing here sees it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from llem.result import RESULT_FILE
from llem.sweep.plan_file import PLAN_FILE
from llem.sweep.search_file import SEARCH_FILE
from llem.tracking import earlier_history, figures, point_files
from llem.tracking.earlier_history import Earlier
from llem.tracking.state import read_section, write_section
from llem.tracking.tracker import result_dirs

if TYPE_CHECKING:
    from llem.plain import Json

SECTION = "wandb"
SWEEP_FILES = (PLAN_FILE, SEARCH_FILE, "multirun.yaml", "summary.csv", "results.csv", "plots")
TAG_MAX = 64  # W&B's longest tag


def _read_json(path: Path) -> dict[str, Json]:
    import json

    data = json.loads(path.read_text())
    return data if isinstance(data, dict) else {}


class RunConfig(TypedDict):
    """What a point's W&B run keeps as its config."""

    overrides: dict[str, str]  # key -> value as written
    config: Json  # the composed configuration
    null_reasons: dict[str, Json]  # figure -> why it is null
    llem: dict[str, Json]  # config_hash, started_at, validity_problems, error, and the history's


def run_config(result: dict[str, Json]) -> RunConfig:
    """What a point's run keeps as config: overrides, composed configuration, null reasons."""
    overrides = {}
    given = result.get("overrides")
    for override in given if isinstance(given, list) else []:
        key, _, value = str(override).lstrip("+~").partition("=")
        overrides[key] = value
    validity = figures.result_section(result, "validity")
    error = result.get("error") or {}
    if not isinstance(error, dict):  # schema 1 wrote the message alone (llem.result.migrate)
        error = {"type": "Error", "message": error}
    problems = validity.get("problems") or []
    return {
        "overrides": overrides,
        "config": result.get("config") or {},
        "null_reasons": dict(figures.result_section(result, "null_reasons")),
        "llem": {
            "config_hash": result.get("config_hash"),
            "started_at": result.get("started_at"),
            "validity_problems": list(problems) if isinstance(problems, list) else [problems],
            "error": f"{error.get('type')}: {error.get('message')}" if error else None,
        },
    }


def run_tags(result: dict[str, Json]) -> list[str]:
    """``status:<ok|failed|skipped>`` and ``energy_valid:<true|false|unknown>``."""
    valid = figures.result_section(result, "validity").get("energy_valid")
    shown = "unknown" if valid is None else str(bool(valid)).lower()
    return [f"status:{result.get('status')}"[:TAG_MAX], f"energy_valid:{shown}"]


class WandbTracker:
    """One W&B project (and entity); runs written offline or sent online as ``mode`` says."""

    def __init__(
        self, project: str, entity: str | None, mode: str | None, dir: str | None, timeout_s: float
    ) -> None:
        import wandb  # noqa: F401  (its absence is said before the sweep starts)

        no_telemetry()
        self.project, self.entity, self.mode = project, entity, mode
        self.dir = Path(dir) if dir else None
        self.timeout_s = timeout_s
        shown = f"{entity}/{project}" if entity else project
        self.where = f"W&B project {shown}" + (f" ({mode})" if mode else "")

    def _settings(self) -> Any:
        import wandb

        return wandb.Settings(
            **({"mode": self.mode} if self.mode else {}),
            init_timeout=self.timeout_s,
            x_disable_stats=True,  # no sampling thread
            x_disable_meta=True,  # no command line, host or environment captured
            x_disable_machine_info=True,
            x_save_requirements=False,
            disable_git=True,
            save_code=False,
            console="off",
            silent=True,
        )

    def _log(self, where: Path, run_id: str, files: list[Path], **init: Any) -> None:
        """One run opened (or resumed), its summary and files logged, finished; wandb's
        service torn down so nothing of it runs on into the next window."""
        import wandb

        summary = init.pop("summary", {})
        history = init.pop("history", [])
        exit_code = init.pop("exit_code", 0)
        (self.dir or where).mkdir(parents=True, exist_ok=True)
        run = wandb.init(
            project=self.project,
            entity=self.entity,
            id=run_id,
            resume="allow",
            dir=str(self.dir or where),
            settings=self._settings(),
            reinit="create_new",
            **init,
        )
        try:
            for step, row in _rows(history):
                run.log(row, step=step)
            run.summary.update(summary)
            artifact = wandb.Artifact(f"{init['job_type']}-{run_id}", type=init["job_type"])
            for path in files:
                if path.is_dir():
                    artifact.add_dir(str(path), name=path.name)
                elif path.is_file():
                    artifact.add_file(str(path), name=path.name)
            run.log_artifact(artifact)
        finally:
            run.finish(exit_code=exit_code)
            wandb.teardown()

    def _result_run(
        self, where: Path, run_dir: Path, run_id: str, earlier: Earlier | None, **init: Any
    ) -> int | str | None:
        """The result of ``run_dir`` logged into ``run_id`` (resumed where ``earlier`` logged
        into it before); the last history step the run holds after it."""
        result = _read_json(run_dir / RESULT_FILE)
        history = point_files.histories(run_dir, result)
        config = run_config(result)
        config["null_reasons"].update(history.null_reasons)
        tags, notes, said = earlier_history.marks(earlier, str(result.get("started_at")))
        config["llem"].update(said)
        self._log(
            where,
            run_id,
            point_files.artifacts(run_dir),
            config=config,
            tags=run_tags(result) + tags,
            notes=notes,
            summary=figures.metrics(result),
            history=history.points,
            exit_code=0 if result.get("status") == "ok" else 1,
            **init,
        )
        return earlier_history.held_after(earlier, [p.step_ms for p in history.points])

    def log_single(self, run_dir: Path) -> bool:
        state = read_section(run_dir, SECTION)
        started = str(_read_json(run_dir / RESULT_FILE).get("started_at"))
        if state.get("started_at") == started:
            return False
        run_id = str(state.get("run_id") or _new_id())
        entry = [state.get("run_id"), state.get("started_at"), state.get("history_to_step_ms")]
        earlier = earlier_history.from_entry(entry if "history_to_step_ms" in state else entry[:2])
        held = self._result_run(
            run_dir, run_dir, run_id, earlier, job_type="run", name=run_dir.name
        )
        write_section(
            run_dir,
            SECTION,
            {**self._identity(), "run_id": run_id, "started_at": started,
             "history_to_step_ms": held},
        )  # fmt: skip
        return True

    def _identity(self) -> dict[str, Any]:
        return {"project": self.project, "entity": self.entity, "mode": self.mode}

    def _sweep_state(self, sweep_dir: Path) -> dict[str, Any]:
        state = read_section(sweep_dir, SECTION)
        group = state.get("group") or "/".join(sweep_dir.resolve().parts[-2:])
        points = state.get("points") if isinstance(state.get("points"), dict) else {}
        return {**state, **self._identity(), "group": group, "points": points}

    def log_point(self, sweep_dir: Path, point_dir: Path) -> bool:
        state = self._sweep_state(sweep_dir)
        index = point_dir.name
        known = state["points"].get(index) or [None, None]
        started = str(_read_json(point_dir / RESULT_FILE).get("started_at"))
        if known[1] == started:
            return False
        run_id = str(known[0] or _new_id())  # a point re-run since: its own run, resumed
        name = _label(sweep_dir, index, point_dir)
        earlier = earlier_history.from_entry(known)
        held = self._result_run(
            sweep_dir, point_dir, run_id, earlier, job_type="point", group=state["group"],
            name=name,
        )  # fmt: skip
        state["points"][index] = [run_id, started, held]
        write_section(sweep_dir, SECTION, state)
        return True

    def end_sweep(self, sweep_dir: Path) -> tuple[int, int]:
        n = sum(self.log_point(sweep_dir, d) for d in result_dirs(sweep_dir))
        state = self._sweep_state(sweep_dir)
        run_id = str(state.get("sweep_run_id") or _new_id())
        plan = _plan(sweep_dir)
        config = {
            "swept": list(plan.get("swept") or []),
            "points": len(plan.get("points") or []),
            "order": plan.get("order"),
        }
        best = point_files.search_best(sweep_dir)
        if best is not None:
            config["search"] = best
        files = [sweep_dir / name for name in SWEEP_FILES]
        self._log(
            sweep_dir, run_id, files, job_type="sweep", group=state["group"],
            name=state["group"], config=config, tags=["llem:sweep"],
        )  # fmt: skip
        write_section(sweep_dir, SECTION, {**state, "sweep_run_id": run_id})
        return n, len(state["points"])

    def later(self, directory: Path) -> str:
        entity = f" --entity {self.entity}" if self.entity else ""
        mode = f" --wandb-mode {self.mode}" if self.mode else ""
        return f"llem-report --to-wandb {directory} --project {self.project}{entity}{mode}"


def no_telemetry() -> None:
    """wandb's own usage metrics off for this process. wandb 0.31 times every ``run.log`` into
    an OpenTelemetry histogram that a thread of this process sends to W&B's server
    (``/sdk/otel/v1/metrics``) every minute and at exit, with the process-wide settings, not the
    run's: offline too, and into the next measured window."""
    import os

    os.environ["WANDB_ERROR_REPORTING"] = "false"  # the switch its recorder reads
    try:
        from wandb.analytics.opentelemetry import opentelemetry_proxy

        opentelemetry_proxy.disable()
    except (ImportError, AttributeError):  # another wandb: the variable above is its switch
        pass


def _rows(history: list[point_files.TimelinePoint]) -> list[tuple[int, dict[str, float]]]:
    """The timeline as W&B history rows: the readings of one step together, steps in order."""
    rows: dict[int, dict[str, float]] = {}
    for p in history:
        rows.setdefault(p.step_ms, {})[p.key] = p.value
    return sorted(rows.items())


def _new_id() -> str:
    return uuid.uuid4().hex[:16]


def _plan(sweep_dir: Path) -> dict[str, Any]:
    try:
        return _read_json(sweep_dir / PLAN_FILE)
    except (OSError, ValueError):
        return {}


def _label(sweep_dir: Path, index: str, point_dir: Path) -> str:
    swept = _plan(sweep_dir).get("swept") or []
    given = _read_json(point_dir / RESULT_FILE).get("overrides")
    overrides = [str(o) for o in given] if isinstance(given, list) else []
    pairs = [o for o in overrides if o.split("=")[0].lstrip("+~") in swept]
    return f"#{index} " + " ".join(pairs) if pairs else f"#{index}"

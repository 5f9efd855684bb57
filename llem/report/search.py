"""The report's part of a search (``hydra/sweeper=llem_search``): where a report's directory holds
``search.json`` (read only through :meth:`llem.sweep.search_file.SearchRecord.read`), the report
adds a "search" section to what it prints (``llem.report.search_section``) and
``search_trials.csv`` to what it writes. This module prepares both.

The section says what was asked (objective, direction, constraints, budget, sampler, seed, the
space), how many trials ran, were feasible and were not (and why), and why the search stopped;
then the best feasible configuration, its objective with the uncertainty it has, and each
constrained figure beside its bound; then the feasible Pareto front.

**The best's uncertainty.** Confirmation trials (``hydra.sweeper.confirm=N``, ``kind`` confirm)
measure the best configuration again: the objective is then the mean over all its runs with a
Student-t 95% CI (``llem.report.repeat_stats.summarise``). A single run has no CI; where its result
holds the measurement's own bound (``<key>_uncertainty``, e.g.
``energy.j_per_output_token_uncertainty``, read from the report's loaded runs) that bound is shown,
and the section says how to get a CI.

**The front.** The feasible search trials that no other feasible search trial beats on both the
objective (in its direction) and the first constraint's figure (lower is better under ``<=``/``<``,
higher under ``>=``/``>``): the price of tightening the first constraint. With no constraint
the front is the best trial.

**search_trials.csv** (written atomically): one row per trial in the order they ran: ``number``
(as in search.json, from 0), ``dir`` (under the sweep directory), ``kind`` (search | confirm), one
column per knob, the objective and each constrained figure (columns named by their result keys),
``feasible``, ``why_not``, ``on_front``.

When no trial is feasible, the section names the trial that came closest: the one with the
objective and the least total violation of the constraints (``Constraint.violation``: relative to
each bound).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from llem.atomic import atomic_write
from llem.errors import ConfigError
from llem.figures.pareto import pareto_front
from llem.report.load import Runs
from llem.report.repeat_stats import Summary, summarise
from llem.result.figure import UNCERTAINTY_SUFFIX
from llem.sweep.search_file import SearchRecord, TrialRecord
from llem.sweep.search_spec import Constraint, parse_constraint

SEARCH_CSV = "search_trials.csv"


@dataclass(frozen=True)
class Trial:
    """One trial of the search as the report shows it."""

    record: TrialRecord
    run_dir: Path  # the trial's directory (under the sweep directory)
    on_front: bool


@dataclass(frozen=True)
class BestFigures:
    """The best feasible configuration over all its runs (the best trial and its confirmations)."""

    trial: Trial
    runs: tuple[TrialRecord, ...]
    objective: Summary  # with ``bound``: the mean of the runs' own bounds, where they have one
    figures: dict[str, Summary]  # constraint text -> its figure over the runs
    n_feasible: int  # runs that met every constraint


@dataclass(frozen=True)
class SearchView:
    """A search's record, prepared for the section, the csv and the plot."""

    record: SearchRecord
    sweep_dir: Path
    constraints: tuple[Constraint, ...]
    trials: tuple[Trial, ...]
    best: BestFigures | None
    closest: Trial | None  # no feasible trial: the one that came closest

    @property
    def front(self) -> list[Trial]:
        return [t for t in self.trials if t.on_front]

    @property
    def searched(self) -> list[Trial]:
        return [t for t in self.trials if t.record.kind == "search"]


# --------------------------------------------------------------------------- preparing


def find_search(runs: Runs) -> SearchView | None:
    """The first of the report's directories that holds a search.json, prepared; else None."""
    for root in runs.roots:
        record = SearchRecord.read(root)
        if record is not None:
            return prepare_search(record, Path(root), runs)
    return None


def _constraints(texts: Sequence[str]) -> tuple[Constraint, ...]:
    """The record's constraints, parsed again (one that no longer parses is left out)."""
    out = []
    for i, text in enumerate(texts):
        try:
            out.append(parse_constraint(i, text))
        except ConfigError:
            continue
    return tuple(out)


def prepare_search(record: SearchRecord, sweep_dir: Path, runs: Runs) -> SearchView:
    constraints = _constraints(record.constraints)
    front = front_trials(record.trials, record.direction, constraints[:1])
    trials = tuple(
        Trial(record=t, run_dir=sweep_dir / t.dir, on_front=t.number in front)
        for t in record.trials
    )
    best = next((t for t in trials if t.record.number == record.best), None)
    return SearchView(
        record=record,
        sweep_dir=sweep_dir,
        constraints=constraints,
        trials=trials,
        best=None if best is None else _best_figures(best, trials, record, runs),
        closest=None if best is not None else closest(trials, constraints),
    )


def front_trials(
    trials: Sequence[TrialRecord], direction: str, first: Sequence[Constraint]
) -> set[int]:
    """The numbers of the feasible search trials that no other one beats on both the objective
    and the first constraint's figure; the best one(s) on the objective alone without one."""
    sign = 1.0 if direction == "minimize" else -1.0
    points: dict[int, tuple[float, float]] = {}
    for t in trials:
        if t.kind != "search" or not t.feasible or t.objective is None:
            continue
        figure = 0.0
        if first:
            value = t.constraints.get(first[0].text)
            if value is None:
                continue
            figure = value if first[0].op in ("<=", "<") else -value
        points[t.number] = (-sign * t.objective, figure)  # pareto_front: a higher first
    numbers = list(points)
    return {numbers[i] for i in pareto_front(list(points.values()))}


def _bounds(runs: Runs, dirs: Sequence[Path], key: str) -> list[object]:
    """Each run's own bound of ``key`` (its ``<key>_uncertainty`` column; None where none)."""
    column = f"{key}{UNCERTAINTY_SUFFIX}"
    frame = runs.frame
    if column not in frame.columns:
        return [None] * len(dirs)
    where = dict(
        zip(
            frame["run_dir"].astype(str).tolist(),
            frame[column].astype(object).tolist(),
            strict=True,
        )
    )
    return [where.get(str(d.resolve())) for d in dirs]


def _best_figures(
    best: Trial, trials: Sequence[Trial], record: SearchRecord, runs: Runs
) -> BestFigures:
    same = [
        t
        for t in trials
        if t is best or (t.record.kind == "confirm" and t.record.knobs == best.record.knobs)
    ]
    objective = summarise(
        [t.record.objective for t in same],
        bounds=_bounds(runs, [t.run_dir for t in same], record.objective),
    )
    figures = {
        text: summarise([t.record.constraints.get(text) for t in same])
        for text in record.constraints
    }
    return BestFigures(
        trial=best,
        runs=tuple(t.record for t in same),
        objective=objective,
        figures=figures,
        n_feasible=sum(1 for t in same if t.record.feasible),
    )


def closest(trials: Sequence[Trial], constraints: Sequence[Constraint]) -> Trial | None:
    """The trial that came closest to feasible: with the objective, fewest constrained figures
    missing, least total violation (relative to each bound)."""

    def distance(t: Trial) -> tuple[bool, int, float]:
        missing, excess = 0, 0.0
        for c in constraints:
            value = t.record.constraints.get(c.text)
            if value is None:
                missing += 1
            else:
                excess += max(c.violation(value), 0.0)
        return (t.record.objective is None or t.record.discounted is not None, missing, excess)

    candidates = [t for t in trials if t.record.kind == "search"]
    return min(candidates, key=distance) if candidates else None


# --------------------------------------------------------------------------- the csv


def trial_rows(view: SearchView) -> list[dict[str, object]]:
    """search_trials.csv's rows (see the module docstring)."""
    knobs: list[str] = []
    for t in view.trials:
        knobs += [k for k in t.record.knobs if k not in knobs]
    rows = []
    for t in view.trials:
        rec = t.record
        row: dict[str, object] = {"number": rec.number, "dir": rec.dir, "kind": rec.kind}
        row.update({k: rec.knobs.get(k, "") for k in knobs})
        row[view.record.objective] = _cell(rec.objective)
        for c in view.constraints:
            row.setdefault(c.key, _cell(rec.constraints.get(c.text)))
        row.update(feasible=rec.feasible, why_not=rec.why_not or "", on_front=t.on_front)
        rows.append(row)
    return rows


def _cell(value: float | None) -> object:
    return "" if value is None or not math.isfinite(value) else value


def write_search_csv(view: SearchView, out_dir: Path) -> Path:
    rows = trial_rows(view)
    fields = list(rows[0]) if rows else ["number", "dir", "kind", "feasible", "why_not", "on_front"]

    def write(path: Path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)

    return atomic_write(Path(out_dir) / SEARCH_CSV, write)

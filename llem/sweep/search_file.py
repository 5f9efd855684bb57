"""``search.json``: a search's record in its sweep directory (written and read only here).

It holds what was asked (objective, direction, constraints, budget, seed, sampler, the space),
every trial in the order they ran (its directory under the sweep directory, its knobs, the
objective and each constrained figure as measured, whether it was feasible and why not), the best
feasible trial, and why the search stopped. It is rewritten atomically after every trial, so an
interrupted search leaves a record of what finished.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llem.atomic import atomic_write_json
from llem.result import utc_now

SEARCH_FILE = "search.json"
# Format history: 1 the first; 2 a trial's ``discounted`` (why its run does not count: not ok,
# or energy not valid under an energy objective or constraint) and ``note`` (energy validity
# not checked); the best chosen on the mean over every run of a configuration (``best_mean``,
# ``best_runs``), ``demoted`` (configurations a confirmation made infeasible) and ``unconfirmed``.
# A version 1 file reads with these null or empty.
FORMAT_VERSION = 2


@dataclass
class TrialRecord:
    number: int  # 0, 1, ... in the order the trials ran (resumed ones first, by directory)
    dir: str  # the trial's directory under the sweep directory
    kind: str  # search (chosen by the sampler) | confirm (the best again, hydra.sweeper.confirm)
    knobs: dict[str, str]
    overrides: list[str]
    status: str  # ok | failed | skipped | interrupted (as in the trial's result.json)
    objective: float | None
    constraints: dict[str, float | None]  # constraint as written -> its key's measured value
    feasible: bool
    why_not: str | None = None  # infeasible: the constraint missed or the figure missing, and why
    config_hash: str | None = None
    resumed: bool = False  # found finished in the sweep directory, not run by this command
    # why the run does not count, whatever its figures (its status is not ok; or its energy is
    # not valid, validity.energy_valid false, under an energy objective or constraint)
    discounted: str | None = None
    note: str | None = None  # a counted trial: what to know (energy validity not checked)


@dataclass
class SearchRecord:
    objective: str
    direction: str
    constraints: list[str]
    budget: int
    seed: int
    sampler: str
    space: list[str]  # each dimension as a sweep expression
    fixed: list[str]  # the overrides every trial got
    space_size: int | None  # configurations in the space (None: a continuous dimension)
    confirm: int = 0
    state: str = "running"  # running | finished | interrupted
    stopped_because: str | None = None
    repeated_proposals: int = 0  # proposals of configurations already measured (not re-run)
    trials: list[TrialRecord] = field(default_factory=list)
    # the best configuration's first (search) trial: feasible in every run, the best mean over
    # them (llem.sweep.search_confirm)
    best: int | None = None
    best_mean: float | None = None  # its objective, the mean over its runs
    best_runs: int = 0  # its runs: the search trial and its confirmations
    # a configuration's search trial dir -> the confirmation that made it infeasible, and why
    demoted: dict[str, str] = field(default_factory=dict)
    unconfirmed: str | None = None  # confirmations stopped before the best had all of them
    written_at: str = ""
    format_version: int = FORMAT_VERSION

    def best_trial(self) -> TrialRecord | None:
        return next((t for t in self.trials if t.number == self.best), None)

    def confirmations(self) -> list[TrialRecord]:
        return [t for t in self.trials if t.kind == "confirm"]

    def write(self, sweep_dir: Path | str) -> Path:
        self.written_at = utc_now()
        return atomic_write_json(Path(sweep_dir) / SEARCH_FILE, asdict(self))

    @classmethod
    def read(cls, sweep_dir: Path | str) -> SearchRecord | None:
        """The sweep directory's search.json; None when it has none or it cannot be read."""
        try:
            data: dict[str, Any] = json.loads(
                (Path(sweep_dir) / SEARCH_FILE).read_text(encoding="utf-8")
            )
            trials = [TrialRecord(**t) for t in data.pop("trials", [])]
            return cls(**data, trials=trials)
        except (OSError, ValueError, TypeError):
            return None

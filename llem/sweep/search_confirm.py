"""A configuration over all its runs, the best chosen on them, and what a confirmation runs.

A search measures each configuration once; ``hydra.sweeper.confirm=N`` measures the best N times
more. The best is chosen on every run of a configuration, not on its first:

- a configuration's objective is the mean over its runs (its search trial and its
  confirmations, ``Standing.mean``);
- it is feasible only while every one of its runs is: a confirmation that misses a constraint
  (or does not count, ``llem.sweep.search_results.discount_of``) demotes it, with the reason
  (``SearchRecord.demoted``), and the next best is confirmed in turn;
- the best is the feasible configuration with the best mean (``best_standing``).

Confirmations go on until the best has its N, or until ``MAX_CANDIDATES`` x N confirmations have
run (``SearchRecord.unconfirmed`` then says how many the best has): a search whose candidates
keep losing to noise stops instead of confirming every configuration it measured.

**A confirmation's traffic.** Confirmation k of a configuration (k = 1, 2, ...) runs with
``repeat`` = the searched repeat + k and, where the traffic draws its send times from
``traffic.seed`` (poisson, gamma), ``traffic.seed`` = the searched seed + k: its runs sample
other arrivals, so the interval over them covers arrival variation, not only the engine's noise.
The k-th confirmations of two configurations share a seed (the same arrivals for both). The
seed is part of a configuration's hash, so the report's table shows each confirmation as its own
row; the search section pools them by knobs.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from llem.sweep.search_file import TrialRecord
from llem.sweep.search_space import Space
from llem.sweep.search_spec import SearchSpec

#: Candidates confirmed at most: confirmations stop after this many x hydra.sweeper.confirm.
MAX_CANDIDATES = 5
#: Overrides a confirmation sets: they replicate a configuration, they do not change it.
REPEAT, TRAFFIC_SEED = "repeat", "traffic.seed"


@dataclass(frozen=True)
class Standing:
    """One configuration: its first trial (the search trial) and every run of it."""

    first: TrialRecord
    runs: tuple[TrialRecord, ...]

    @property
    def feasible(self) -> bool:
        return all(r.feasible for r in self.runs)

    @property
    def mean(self) -> float | None:
        values = [r.objective for r in self.runs if r.objective is not None]
        return statistics.fmean(values) if values else None

    @property
    def confirmations(self) -> int:
        return sum(1 for r in self.runs if r.kind == "confirm")

    def demotion(self) -> str | None:
        """Why a configuration whose search trial was feasible is not (None: it is, or its
        search trial already was not)."""
        if not self.first.feasible:
            return None
        broken = [r for r in self.runs if not r.feasible]
        if not broken:
            return None
        return "; ".join(f"confirmation #{r.dir}: {r.why_not}" for r in broken)


def standings(space: Space, trials: Sequence[TrialRecord]) -> list[Standing]:
    """Every configuration measured, in the order first measured, with all its runs."""
    groups: dict[tuple, list[TrialRecord]] = {}
    for t in trials:
        groups.setdefault(space.canonical(t.knobs), []).append(t)
    return [Standing(runs[0], tuple(runs)) for runs in groups.values()]


def best_standing(spec: SearchSpec, ranked: Sequence[Standing]) -> Standing | None:
    """The feasible configuration with the best mean objective."""
    best: Standing | None = None
    for s in ranked:
        mean = s.mean
        if not s.feasible or mean is None:
            continue
        if best is None or spec.better(mean, best.mean or 0.0):
            best = s
    return best


def searched_repeat(space: Space) -> int:
    """The ``repeat`` every search trial runs with (a fixed ``repeat=N``, else 0)."""
    for f in space.fixed:
        key, _, value = f.partition("=")
        if key == REPEAT and value.strip().lstrip("-").isdigit():
            return int(value)
    return 0


def confirm_overrides(
    space: Space, knobs: dict[str, str], k: int, traffic_seed: int | None
) -> list[str]:
    """The overrides of confirmation ``k`` (1, 2, ...) of ``knobs``: the search trial's, with
    ``repeat`` (and, when ``traffic_seed`` is the searched seed, ``traffic.seed``) moved on by
    ``k``."""
    replaced = {REPEAT: searched_repeat(space) + k}
    if traffic_seed is not None and TRAFFIC_SEED not in space.keys:
        replaced[TRAFFIC_SEED] = traffic_seed + k
    kept = [o for o in space.overrides(knobs) if o.split("=", 1)[0] not in replaced]
    return kept + [f"{key}={value}" for key, value in replaced.items()]


def as_searched(space: Space, overrides: Sequence[str]) -> list[str]:
    """A run's overrides with its replication (``repeat``, ``traffic.seed``) put back as the
    search trials have it: what ``Space.knobs_of`` reads a confirmation's knobs from."""
    fixed = {f.split("=", 1)[0]: f for f in space.fixed}
    out = []
    for o in overrides:
        key = o.split("=", 1)[0]
        if key in (REPEAT, TRAFFIC_SEED) and key not in space.keys:
            if key in fixed:
                out.append(fixed[key])
            continue
        out.append(o)
    return out


def override_int(overrides: Sequence[str], key: str) -> int | None:
    """The whole-number value ``key`` has in ``overrides`` (None: not set, or not a number)."""
    for o in overrides:
        k, _, v = o.partition("=")
        if k == key and v.strip().lstrip("-").isdigit():
            return int(v)
    return None

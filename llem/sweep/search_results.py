"""A search's trials as results: each judged from its result.json, and the sweep directory read
for the trials of this search that already finished (resume).

Resume reads every trial directory. A finished trial of this search (its overrides are a point of
the space and its config hash is that point's) is told to the search and not run again; anything
else (an interrupted or lost trial, another search's, another configuration's) is moved aside to
``superseded/<time>/<n>``, so that nothing older stands for a new trial.
"""

from __future__ import annotations

from pathlib import Path

from llem.result import RunResult
from llem.result.keys import needs_energy, value_at, why_missing
from llem.sweep.planner import Planner
from llem.sweep.point_dirs import point_dirs
from llem.sweep.search import Search
from llem.sweep.search_confirm import (
    REPEAT,
    as_searched,
    confirm_overrides,
    override_int,
    searched_repeat,
)
from llem.sweep.search_spec import SearchSpec
from llem.sweep.search_verdict import INTERVAL_ENDS, Verdict, judge
from llem.sweep.superseded import supersede, supersede_stamp

# A failed result that says nothing about its configuration: the trial runs again on resume.
_NOT_FINISHED = ("KeyboardInterrupt", "SlurmJobLost", "NoResult")


def verdict_of(spec: SearchSpec, result: RunResult | None) -> Verdict:
    """A trial's result judged against the declaration (no result: nothing measured). A run
    that did not end ok, or whose energy is not valid where the search reads energy, does not
    count (``discount``)."""
    if result is None:
        return judge(spec, {}, lambda key: "the trial left no result.json")
    keys = spec.keys + [end for c in spec.constraints for end in INTERVAL_ENDS.get(c.key, ())]
    values = {key: value_at(result, key) for key in keys}
    why_not_counted, note = discount_of(spec, result)
    return judge(spec, values, lambda key: why_missing(result, key), why_not_counted, note)


def discount_of(spec: SearchSpec, result: RunResult) -> tuple[str | None, str | None]:
    """(why ``result`` does not count, a note on one that does). It counts when its run ended
    ok and, where the objective or a constraint is an energy figure (``needs_energy``), its
    energy is valid (``validity.energy_valid``). Validity not checked (null) with energy figures
    present counts: nothing found it wrong, and the note says it was not checked."""
    if result.status != "ok":
        err = result.error
        return f"the run {result.status}" + (f" ({err.type}: {err.message})" if err else ""), None
    energy_keys = [k for k in spec.keys if needs_energy(k)]
    if not energy_keys:
        return None, None
    valid = result.validity.energy_valid
    if valid is False:
        problems = "; ".join(result.validity.problems) or "no problem recorded"
        return f"its energy is not valid (validity.energy_valid=false: {problems})", None
    if valid is None and any(value_at(result, k) is not None for k in energy_keys):
        return None, "energy validity not checked (validity.energy_valid=null)"
    return None, None


def confirmation_of(search: Search, result: RunResult) -> int:
    """Which confirmation of its configuration ``result`` is (0: the search trial), by its
    ``repeat`` against the searched one."""
    repeat = override_int(result.overrides, REPEAT)
    return max((repeat or 0) - searched_repeat(search.space), 0)


def not_a_trial(
    planner: Planner, search: Search, index: int, result: RunResult | None
) -> str | None:
    """Why a directory does not hold a finished trial of this search (None: it does)."""
    if result is None:
        return "an unfinished attempt"
    if result.status == "failed" and result.error and result.error.type in _NOT_FINISHED:
        return f"a trial that did not finish ({result.error.type})"
    knobs = search.space.knobs_of(as_searched(search.space, result.overrides))
    if knobs is None:
        return "not a point of this search's space"
    k = confirmation_of(search, result)
    # a confirmation's overrides as this search would write them (its traffic seed included: one
    # run with another seed, or from before confirmations drew one, is another configuration)
    overrides = (
        confirm_overrides(search.space, knobs, k, search.traffic_seed)
        if k
        else search.space.overrides(knobs)
    )
    point = planner.analyse(index, overrides)
    if result.config_hash not in (point.config_hash, point.legacy_hash):
        return "a result of another configuration"
    return None


def resume(planner: Planner, search: Search, sweep_dir: Path) -> list[str]:
    """Tell ``search`` every finished trial of it in ``sweep_dir``; move the rest aside.
    Returns the log lines."""
    lines: list[str] = []
    stamp = supersede_stamp()
    for index, d in sorted(point_dirs(sweep_dir).items()):
        result = RunResult.read(d)
        why = not_a_trial(planner, search, index, result)
        if why is None and result is not None:
            search.resume(
                str(index),
                search.space.knobs_of(as_searched(search.space, result.overrides)) or {},
                verdict_of(search.spec, result),
                kind="confirm" if confirmation_of(search, result) else "search",
                status=result.status,
                config_hash=result.config_hash,
            )
            continue
        target = supersede(d, index, stamp)
        lines.append(f"#{index}: {why}; moved aside to {target}")
    if search.record.trials:
        lines.append(
            f"resumed: {search.searched} trial(s) of this search found finished, not run again"
        )
    return lines


def figure_text(value: float | None) -> str:
    return "none" if value is None else f"{value:.4g}"


def summary(search: Search) -> list[str]:
    """The search's closing log lines: why it stopped, and the best feasible configuration."""
    rec = search.record
    feasible = sum(1 for t in rec.trials if t.kind == "search" and t.feasible)
    lines = [
        f"search {rec.state}: {search.searched} trial(s), {feasible} feasible"
        + (f"; {rec.stopped_because}" if rec.stopped_because else "")
    ]
    best = rec.best_trial()
    if best is None:
        lines.append("no feasible configuration was found")
        return lines
    figures = ", ".join(
        f"{c.key} {figure_text(best.constraints.get(c.text))} ({c.op} {c.bound:g})"
        for c in search.spec.constraints
    )
    knobs = " ".join(f"{k}={v}" for k, v in best.knobs.items())
    runs = f" (mean of {rec.best_runs} runs)" if rec.best_runs > 1 else ""
    lines.append(
        f"best feasible: #{best.dir} [{knobs}] {rec.objective}={figure_text(rec.best_mean)}{runs}"
        + (f"; its search trial: {figures}" if figures else "")
    )
    lines += [f"demoted: #{d} ({why})" for d, why in rec.demoted.items()]
    if rec.unconfirmed:
        lines.append(f"not fully confirmed: {rec.unconfirmed}")
    return lines

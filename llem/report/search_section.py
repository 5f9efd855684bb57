"""The printed "search" section of a report (prepared by :mod:`llem.report.search`, which says
what it holds): what was asked, what ran, the best feasible configuration with its uncertainty,
the feasible Pareto front; or, with no feasible trial, the one that came closest. Every line fits
the report's width.
"""

from __future__ import annotations

import textwrap

from llem.report.labels import format_number, format_with_ci, knob_headers, shorten
from llem.report.repeat_stats import summarise
from llem.report.search import BestFigures, SearchView
from llem.sweep.search_file import TrialRecord
from llem.sweep.search_spec import Constraint

CONFIRM_HINT = "hydra.sweeper.confirm=N re-measures the best"
INDENT = "  "
PERCENTILE_KEYS = ("p50", "p90", "p99")


def _wrap(text: str, width: int, indent: str = INDENT) -> list[str]:
    return textwrap.wrap(
        text, width=width, subsequent_indent=indent + INDENT, break_on_hyphens=False
    )


def _knobs(knobs: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in knobs.items())


def render_search(view: SearchView, width: int = 100) -> str:
    """The printed "search" section."""
    lines = _asked(view, width) + _ran(view, width) + _undecided_lines(view, width)
    lines += _demoted(view, width)
    if view.best is not None:
        lines += _best_lines(view, view.best, width) + _front_lines(view, width)
    else:
        lines += _none_feasible(view, width)
    return "\n".join(lines)


def _asked(view: SearchView, width: int) -> list[str]:
    rec = view.record
    where = "; ".join(rec.constraints) or "no constraints"
    size = f"{rec.space_size} configurations" if rec.space_size else "continuous"
    confirm = f", confirm {rec.confirm}" if rec.confirm else ""
    return [
        *_wrap(f"search: {rec.direction} {rec.objective} subject to {where}", width, ""),
        *_wrap(
            f"{INDENT}budget {rec.budget} trials, sampler {rec.sampler}, seed {rec.seed}{confirm}",
            width,
        ),
        *_wrap(f"{INDENT}space ({size}): {' '.join(rec.space)}", width),
    ]


def _ran(view: SearchView, width: int) -> list[str]:
    """'8 trials ran: 6 searched (4 feasible, 2 infeasible: why), 2 confirmations of the best'
    and why the search stopped."""
    rec = view.record
    searched = view.searched
    feasible = sum(1 for t in searched if t.record.feasible)
    why = _why_infeasible(view)
    judged = f"{feasible} feasible, {len(searched) - feasible} infeasible" + (
        f": {why}" if why else ""
    )
    confirms = len(view.trials) - len(searched)
    text = f"{len(view.trials)} trials ran: " + (
        f"{len(searched)} searched ({judged}), {confirms} confirmations of the best"
        if confirms
        else judged
    )
    resumed = sum(1 for t in view.trials if t.record.resumed)
    if resumed:
        text += f"; {resumed} of them found finished by a resume (not run again)"
    stopped = rec.state if rec.state != "running" else "running (or cut off before it ended)"
    if rec.stopped_because:
        stopped += f": {rec.stopped_because}"
    return _wrap(f"{INDENT}{text}", width) + _wrap(f"{INDENT}search {stopped}", width)


def _undecided(rec: TrialRecord, view: SearchView) -> list[Constraint]:
    """The constraints a trial met on its point estimate that its 95% interval did not confirm
    (``llem.sweep.search_verdict``: its reason says "undecided")."""
    why = rec.why_not or ""
    return [c for c in view.constraints if f"{c.text}: undecided" in why]


def _undecided_lines(view: SearchView, width: int) -> list[str]:
    """'undecided by the 95% interval: #3, #5': trials whose feasibility the interval could not
    decide (counted infeasible)."""
    dirs = [f"#{t.record.dir}" for t in view.trials if _undecided(t.record, view)]
    if not dirs:
        return []
    return _wrap(
        f"{INDENT}undecided by the 95% interval (counted infeasible): {', '.join(dirs)}", width
    )


def _demoted(view: SearchView, width: int) -> list[str]:
    """Configurations a confirmation made infeasible (the best is chosen on every run of a
    configuration), and a best left short of its confirmations."""
    rec = view.record
    lines = []
    for d, why in rec.demoted.items():
        lines += _wrap(f"{INDENT}demoted: #{d}, feasible when searched; {why}", width)
    if rec.unconfirmed:
        lines += _wrap(f"{INDENT}not fully confirmed: {rec.unconfirmed}", width)
    return lines


def _why_infeasible(view: SearchView) -> str:
    """'failed ×1, energy not valid ×1, latency.tpot_ms.p90 <= 50 missed ×2' over the infeasible
    search trials: a trial whose run does not count or that has no objective by its status (or
    'energy not valid'), the others by each constraint they missed."""
    counts: dict[str, int] = {}
    for t in view.searched:
        rec = t.record
        if rec.feasible:
            continue
        reasons = [rec.status if rec.status != "ok" else "no objective"]
        if rec.discounted is not None and rec.status == "ok":
            reasons = ["energy not valid"]
        elif rec.objective is not None and rec.discounted is None:
            reasons = [
                f"{c.text} {'not measured' if v is None else 'missed'}"
                for c in view.constraints
                if (v := rec.constraints.get(c.text)) is None or not c.met(v)
            ] + [f"{c.text} undecided by its 95% interval" for c in _undecided(rec, view)]
        for what in reasons:
            counts[what] = counts.get(what, 0) + 1
    return ", ".join(f"{what} ×{n}" for what, n in counts.items())


def _objective_text(best: BestFigures) -> str:
    s = best.objective
    n = s.n
    if n >= 2:
        text = f"{format_with_ci(s.mean, s.ci_half)} (mean of {n} runs, 95% CI, Student t)"
        if s.bound is not None:
            text += f"; instrument bound ±{format_number(s.bound, 2)} (not in the CI)"
        return text
    if s.bound is not None:
        return (
            f"{format_with_ci(s.mean, s.bound)} (n=1: the measurement's own bound; no CI: "
            f"{CONFIRM_HINT})"
        )
    return f"{format_number(s.mean)} (n=1: no CI; {CONFIRM_HINT})"


def _best_lines(view: SearchView, best: BestFigures, width: int) -> list[str]:
    rec = best.trial.record
    lines = _wrap(f"best feasible configuration: #{rec.dir} {_knobs(rec.knobs)}", width, "")
    lines += _wrap(f"{INDENT}directory: {best.trial.run_dir}", width)
    names = [view.record.objective, *(c.key for c in view.constraints)]
    pad = max(len(n) for n in names)
    under = INDENT + " " * pad  # continuation lines under the figures
    lines += _wrap(f"{INDENT}{view.record.objective:<{pad}}  {_objective_text(best)}", width, under)
    for c in view.constraints:
        s = best.figures.get(c.text) or summarise([])
        runs = f"; {_met_in(best, c)}" if s.n >= 2 else ": met"
        shown = format_with_ci(s.mean, s.ci_half)
        lines += _wrap(f"{INDENT}{c.key:<{pad}}  {shown} ({c.op} {c.bound:g}{runs})", width, under)
    notes = sorted({r.note for r in best.runs if r.note})
    if notes:
        lines += _wrap(f"{INDENT}note: {'; '.join(notes)}", width)
    if best.n_feasible < len(best.runs):
        lines += _wrap(
            f"{INDENT}{len(best.runs) - best.n_feasible} of its {len(best.runs)} runs missed a "
            f"constraint: {_why_confirm_missed(best)}",
            width,
        )
    return lines


def _met_in(best: BestFigures, c: Constraint) -> str:
    met = sum(1 for r in best.runs if (v := r.constraints.get(c.text)) is not None and c.met(v))
    return f"met in {met} of {len(best.runs)} runs"


def _why_confirm_missed(best: BestFigures) -> str:
    return "; ".join(f"#{r.dir} {r.why_not}" for r in best.runs if not r.feasible and r.why_not)


def _front_lines(view: SearchView, width: int) -> list[str]:
    if not view.constraints:
        return []
    sign = 1.0 if view.record.direction == "minimize" else -1.0
    front = sorted(view.front, key=lambda t: sign * (t.record.objective or 0.0))  # best first
    c = view.constraints[0]
    better = "lower" if c.op in ("<=", "<") else "higher"
    head = (
        f"feasible Pareto front ({len(front)} of {sum(t.record.feasible for t in view.searched)} "
        f"feasible trials; {view.record.objective} {view.record.direction}d, {c.key} "
        f"{better} is better):"
    )
    cols = ["trial", short_key(view.record.objective), short_key(c.key), "knobs"]
    rows = [
        [
            f"#{t.record.dir}",
            format_number(t.record.objective),
            format_number(t.record.constraints.get(c.text)),
            _short_knobs(t.record.knobs),
        ]
        for t in front
    ]
    return _wrap(head, width, "") + _table(cols, rows, width)


def short_key(key: str) -> str:
    """A figure's key without its section: 'latency.ttft_ms.p90' → 'ttft_ms.p90'."""
    parts = key.split(".")
    return ".".join(parts[-2:] if parts[-1] in PERCENTILE_KEYS and len(parts) > 2 else parts[-1:])


def _short_knobs(knobs: dict[str, str]) -> str:
    short = knob_headers(list(knobs))
    return " ".join(f"{short[k]}={v}" for k, v in knobs.items())


def _table(cols: list[str], rows: list[list[str]], width: int) -> list[str]:
    """Columns padded to their widest cell; the last one shortened to fit ``width``."""
    widths = [max(len(r[i]) for r in [cols, *rows]) for i in range(len(cols) - 1)]
    out = []
    for r in [cols, *rows]:
        left = INDENT + "  ".join(f"{v:>{w}}" for v, w in zip(r, widths, strict=False)) + "  "
        out.append(left + shorten(r[-1], max(width - len(left), 8)))
    return out


def _none_feasible(view: SearchView, width: int) -> list[str]:
    n = len(view.searched)
    lines = _wrap(
        f"no feasible configuration: none of the {n} searched trials met every constraint",
        width,
        "",
    )
    t = view.closest
    if t is None:
        return lines
    figures = ", ".join(
        f"{c.key} {format_number(t.record.constraints.get(c.text)) or 'none'} ({c.op} {c.bound:g})"
        for c in view.constraints
    )
    shown = format_number(t.record.objective) or "none"
    lines += _wrap(
        f"{INDENT}closest: #{t.record.dir} {_knobs(t.record.knobs)}: {view.record.objective} "
        f"{shown}" + (f", {figures}" if figures else ""),
        width,
    )
    if t.record.why_not:
        lines += _wrap(f"{INDENT}why not: {t.record.why_not}", width)
    return lines

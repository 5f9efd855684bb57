"""The report's section on phase energy by difference beside the fitted split
(``llem.report.phase_difference``), and its file ``phase_energy.csv``; '' / no file where the
runs do not pair 1 new token with N (``+experiment=phase_energy`` makes such a sweep)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from llem.atomic import atomic_write
from llem.report.columns import Column
from llem.report.labels import format_with_ci
from llem.report.layout import split_columns, table_lines
from llem.report.phase_difference import Estimate, PhaseComparison

PHASE_CSV = "phase_energy.csv"
HEADING = (
    "phase energy by difference (the same prompts with 1 new token and with N, each repeated: "
    "decode J/token = (e_N - e_1) / (q_N - q_1), prefill J/prompt token = (e_1 - q_1 x decode) / "
    "p, per request, ± 95% t-interval over the repeats) beside the fitted split (the N-token "
    "runs' energy.prefill_j per prompt token and energy.decode_j per output token ± the 95% "
    "interval of their mean); agree = the intervals overlap:"
)
FOOT = (
    "gap % 1/N = the energy between engine steps, as a share of the 1-token and of the N-token "
    "runs' windows: the difference counts it (the 1-token runs' in prefill, the N-token runs' "
    "further gaps in decode), the split leaves it out of both phases, so where it is large the "
    "difference reads higher for that reason alone"
)


def _cell(est: Estimate) -> str:
    if est.value is None:
        return "null"
    return format_with_ci(est.value, est.half_width)


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.0f}"


def _verdict(agrees: bool | None) -> str:
    return "" if agrees is None else ("yes" if agrees else "NO")


def _columns(rows: Sequence[PhaseComparison]) -> list[Column]:
    def column(header: str, cells: list[str], right: bool = True) -> Column:
        return Column(header, cells, right)

    gaps = [f"{_percent(r.between_fraction_1)}/{_percent(r.between_fraction_n)}" for r in rows]
    return [
        column("configuration", [r.label for r in rows], False),
        column("N", [str(r.new_tokens) for r in rows]),
        column("runs 1/N", [f"{r.runs_1}/{r.runs_n}" for r in rows]),  # with energy
        column("J/prompt tok diff", [_cell(r.prefill) for r in rows]),
        column("J/prompt tok fit", [_cell(r.fitted_prefill) for r in rows]),
        column("agree", [_verdict(r.prefill_agrees) for r in rows], False),
        column("J/decode tok diff", [_cell(r.decode) for r in rows]),
        column("J/decode tok fit", [_cell(r.fitted_decode) for r in rows]),
        column("agree", [_verdict(r.decode_agrees) for r in rows], False),
        column("gap % 1/N", gaps),
    ]


def _reasons(rows: Sequence[PhaseComparison]) -> list[str]:
    """Each distinct null reason once, with the figures it nulls."""
    seen: dict[str, list[str]] = {}
    for r in rows:
        for name, est in (
            ("J/prompt tok diff", r.prefill),
            ("J/decode tok diff", r.decode),
            ("J/prompt tok fit", r.fitted_prefill),
            ("J/decode tok fit", r.fitted_decode),
        ):
            if est.value is None and est.null_reason:
                where = f"{name} ({r.label}, N={r.new_tokens})"
                seen.setdefault(est.null_reason, []).append(where)
    return [f"null: {reason}: {', '.join(where)}" for reason, where in seen.items()]


def render_phase_energy(rows: Sequence[PhaseComparison], width: int) -> str:
    """The section's text; '' without rows."""
    if not rows:
        return ""
    lines = textwrap.wrap(HEADING, width=width)
    columns = _columns(rows)
    for i, part in enumerate(split_columns(columns[:2], columns[2:], width)):
        lines += ([""] if i else []) + table_lines(part)  # a part per width, keys repeated
    notes = [FOOT, *_reasons(rows)]
    for note in notes:
        lines += textwrap.wrap(note, width=width, subsequent_indent="  ")
    return "\n".join(lines)


def phase_frame(rows: Sequence[PhaseComparison]) -> pd.DataFrame:
    """One row per comparison: each figure's value, 95% half-width and null reason, the
    verdicts and the gap share."""
    records = []
    for r in rows:
        record: dict[str, object] = {
            "configuration": r.label,
            "new_tokens": r.new_tokens,
            "runs_1": r.runs_1,
            "runs_n": r.runs_n,
        }
        for name, est in (
            ("difference.j_per_prompt_token", r.prefill),
            ("difference.j_per_decode_token", r.decode),
            ("fit.j_per_prompt_token", r.fitted_prefill),
            ("fit.j_per_decode_token", r.fitted_decode),
        ):
            record[name] = est.value
            record[f"{name}.ci95_half"] = est.half_width
            record[f"{name}.null_reason"] = est.null_reason
        record["prefill_agrees"] = r.prefill_agrees
        record["decode_agrees"] = r.decode_agrees
        record["between_steps_fraction_1"] = r.between_fraction_1
        record["between_steps_fraction_n"] = r.between_fraction_n
        records.append(record)
    return pd.DataFrame.from_records(records)


def write_phase_csv(rows: Sequence[PhaseComparison], out_dir: Path) -> Path | None:
    """``out_dir/phase_energy.csv``; None (no file) without rows."""
    if not rows:
        return None
    path = out_dir / PHASE_CSV
    frame = phase_frame(rows)
    atomic_write(path, lambda p: frame.to_csv(p, index=False))
    return path

"""What the report prints around its table: the heading above it, and under it the runs whose
energy was judged invalid and the runs that are not ok (see ``llem.report.table``)."""

from __future__ import annotations

import textwrap

import pandas as pd

from llem.report.cells import is_missing
from llem.report.find import as_given
from llem.report.hardware import DETAILS, GPU, hardware_kind
from llem.report.load import Runs
from llem.report.stats import N_INVALID, N_LEFT_OUT, VALID, judged_invalid

DEFAULT_WIDTH = 100
INVALID_MARK = "!"
#: at most this many invalid runs are listed under the table (all are in results.csv)
MAX_INVALID_LINES = 10


def _col(summary: pd.DataFrame, name: str) -> list[object]:
    return summary[name].astype(object).tolist() if name in summary.columns else []


def _where(row: pd.Series, runs: Runs) -> str:
    """The run's overrides; without any, its directory as the report's directories were named."""
    overrides = row.get("overrides")
    if isinstance(overrides, str) and overrides:
        return overrides
    return str(as_given(row["run_dir"], runs.roots))


def _wrapped(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, subsequent_indent="    ")


def render_invalid(runs: Runs, width: int = DEFAULT_WIDTH) -> str:
    """One line (wrapped) per ok run whose energy was judged invalid, with its problems."""
    frame = runs.frame
    if VALID not in frame.columns:
        return ""
    lines: list[str] = []
    bad = [
        row for _, row in frame.iterrows() if row["status"] == "ok" and judged_invalid(row[VALID])
    ]
    for row in bad[:MAX_INVALID_LINES]:
        problems = row.get("validity.problems")
        text = (
            str(problems)
            if not is_missing(problems) and str(problems)
            else "energy judged invalid (no problem recorded)"
        )
        lines += _wrapped(f"{INVALID_MARK} {_where(row, runs)}: {text}", width)
    if len(bad) > MAX_INVALID_LINES:
        rest = len(bad) - MAX_INVALID_LINES
        lines += _wrapped(
            f"{INVALID_MARK} and {rest} more run{'s' if rest != 1 else ''} with invalid "
            "energy: see the valid and validity.problems columns of results.csv",
            width,
        )
    return "\n".join(lines)


def render_problems(runs: Runs, width: int = DEFAULT_WIDTH) -> str:
    """One line (wrapped) per run that is not ok: where it was, what happened, the hint."""
    lines: list[str] = []
    for _, row in runs.frame.iterrows():
        status = str(row["status"])
        if status == "ok":
            continue
        parts = [f"{status}: {_where(row, runs)}"]
        etype, msg, hint = (row.get(c) for c in ("error.type", "error.message", "error.hint"))
        reason = ": ".join(str(x) for x in (etype, msg) if not is_missing(x) and str(x))
        if reason:
            parts.append(f"— {reason}")
        if not is_missing(hint) and str(hint):
            parts.append(f"(hint: {hint})")
        lines += _wrapped(" ".join(parts), width)
    return "\n".join(lines)


def render_heading(runs: Runs, summary: pd.DataFrame) -> str:
    counts: dict[str, int] = {}
    for s in runs.frame["status"].astype(str).tolist():
        counts[s] = counts.get(s, 0) + 1
    order = ["ok", "failed", "skipped", "missing"]
    keys = sorted(counts, key=lambda k: (order.index(k) if k in order else len(order), k))
    detail = ", ".join(f"{counts[k]} {k}" for k in keys)
    n_cfg = summary["config_hash"].nunique() if "config_hash" in summary.columns else len(summary)
    text = (
        f"llem report: {runs.n_runs} run{'s' if runs.n_runs != 1 else ''} ({detail}), "
        f"{n_cfg} configuration{'s' if n_cfg != 1 else ''}"
    )
    if GPU in summary.columns:  # rows are configurations × hardware (and thread settings)
        labels = [str(v) for v in _col(summary, GPU) if not is_missing(v) and v != "unknown"]
        kinds = {hardware_kind(label) for label in labels}
        plural = "kind" if len(kinds) == 1 else "kinds"
        text += f" on {len(kinds)} {plural} of hardware ({len(summary)} rows)"
    return text


def _count(value: object) -> int:
    return 0 if is_missing(value) else int(value)  # type: ignore[call-overload]


def invalid_note(summary: pd.DataFrame) -> str | None:
    """What the ``!`` marks mean: how many runs, left out or kept in."""
    n_inv = sum(_count(v) for v in _col(summary, N_INVALID))
    if not n_inv:
        return None
    n_out = sum(_count(v) for v in _col(summary, N_LEFT_OUT))
    runs_text = f"{n_inv} run{'s' if n_inv != 1 else ''}"
    if n_out:
        return (
            f"{INVALID_MARK} {runs_text} whose energy was judged invalid: {n_out} left out of "
            "every figure of their row, tok/s too (n counts the runs used; --include-invalid "
            "keeps them)"
        )
    return (
        f"{INVALID_MARK} {runs_text} whose energy was judged invalid, kept in (--include-invalid)"
    )


def gpu_set_note(summary: pd.DataFrame) -> str | None:
    """Why one configuration has a row per GPU set, when it does."""
    column = DETAILS["gpus"][0]
    if column not in summary.columns:
        return None
    return (
        "runs on different GPUs are not pooled: each run's energy is measured over exactly the "
        "GPUs it used, and another GPU, even of the same model, is another instrument (the "
        f"label shows each UUID's start; the full UUIDs are {column} in summary.csv)"
    )

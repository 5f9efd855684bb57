"""The printed table: one row per configuration, sized for a 100-column terminal.

Columns: the knobs that vary in the loaded runs (header = last dotted component, or the last two
when that is ambiguous), ``GPU`` (model ×count) when the runs ran on different hardware, then
``tok/s`` and ``J/tok`` (mean over ok repeats, ``±`` the 95% CI half-width: the Student-t
half-width over repeats plus, for J/tok, the runs' mean uncertainty bound, so one run with a bound
has one too), ``TTFT p50 ms``, ``peak MB`` and ``status`` (``ok ×3``, ``ok ×2, failed ×1``).
A ``!`` after J/tok marks a configuration with runs whose energy was judged invalid (left out of
J/tok unless ``--include-invalid``); a note under the table counts them and
:func:`render_invalid` lists their problems. Empty cells are figures that do not exist (no energy
on CPU, failed runs, every run invalid); they are never shown as 0.

When the table would be wider than the terminal, long knob values are shortened first (paths to
their last component, then a middle ellipsis), then the ``±`` parts go, and as a last resort the
knobs move into a numbered legend under the table. Full values are always in results.csv and
summary.csv.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from llem.report.load import Runs, is_missing
from llem.report.stats import BOUND_SUFFIX, GPU, N_INVALID, N_LEFT_OUT, VALID, judged_invalid

DEFAULT_WIDTH = 100
GAP = "  "
INVALID_MARK = "!"
#: at most this many invalid runs are listed under the table (all are in results.csv)
MAX_INVALID_LINES = 10
TOKS = "throughput.output_tokens_per_s"
JTOK = "energy.j_per_output_token"
#: 'peak MB' shows the first of these that any configuration has (GPU runs: torch's allocator peak;
#: CPU runs: the process's peak resident memory)
MEMORY_FIELDS = (
    "memory.peak_allocated_mb",
    "memory.peak_device_used_mb",
    "memory.peak_reserved_mb",
    "memory.peak_host_rss_mb",
)


def format_number(value: Any, sig: int = 3) -> str:
    """Compact, fixed-point: 386.0 → '386', 22.51 → '22.5', 0.2051 → '0.205', None → ''."""
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    x = float(value)
    if not math.isfinite(x):
        return ""
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1e7 or ax < 1e-3:
        return f"{x:.{sig - 1}e}"
    return f"{x:.{_decimals(ax, sig)}f}"


def _decimals(ax: float, sig: int) -> int:
    return max(0, sig - 1 - math.floor(math.log10(ax)))


def format_with_ci(mean: Any, half: Any, sig: int = 3) -> str:
    """'386 ±19': the half-width to the mean's precision (one significant digit if that gives 0)."""
    text = format_number(mean, sig)
    if not text or is_missing(half) or "e" in text:
        return text
    h = abs(float(half))
    decimals = _decimals(abs(float(mean)), sig) if float(mean) != 0 else sig
    if h > 0 and round(h, decimals) == 0:
        decimals = _decimals(h, 1)  # one significant digit rather than '±0'
    return f"{text} ±{h:.{decimals}f}"


def knob_headers(knobs: Sequence[str]) -> dict[str, str]:
    """Short, unambiguous headers: 'pytorch.batch_size' → 'batch_size'."""
    parts = {k: k.replace("/", ".").split(".") for k in knobs}
    depth = {k: 1 for k in knobs}
    while True:
        short = {k: ".".join(parts[k][-depth[k] :]) for k in knobs}
        clashes = [k for k in knobs if list(short.values()).count(short[k]) > 1]
        grow = [k for k in clashes if depth[k] < len(parts[k])]
        if not grow:
            return short
        for k in grow:
            depth[k] += 1


def basenames(values: Sequence[str]) -> list[str]:
    """Path-like values to their last component, when those stay distinct."""
    short = [v.rstrip("/").rsplit("/", 1)[-1] or v if "/" in v else v for v in values]
    return short if len(set(short)) == len(set(values)) else list(values)


def shorten(text: str, limit: int) -> str:
    """A middle ellipsis that keeps both ends ('Qwen2.5…tuned-0'); 0 means no limit."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit - 1 + 1) // 2
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


@dataclass
class _Column:
    header: str
    cells: list[str]
    right: bool

    @property
    def width(self) -> int:
        return max([len(self.header)] + [len(c) for c in self.cells])


def _layout(columns: Sequence[_Column]) -> list[str]:
    widths = [c.width for c in columns]
    lines = []
    header = GAP.join(
        c.header.rjust(w) if c.right else c.header.ljust(w)
        for c, w in zip(columns, widths, strict=True)
    )
    lines.append(header.rstrip())
    lines.append(GAP.join("-" * w for w in widths))
    for i in range(len(columns[0].cells) if columns else 0):
        row = GAP.join(
            c.cells[i].rjust(w) if c.right else c.cells[i].ljust(w)
            for c, w in zip(columns, widths, strict=True)
        )
        lines.append(row.rstrip())
    return lines


def _total_width(columns: Sequence[_Column]) -> int:
    return sum(c.width for c in columns) + len(GAP) * max(0, len(columns) - 1)


def _col(summary: pd.DataFrame, name: str) -> list[Any]:
    return (
        summary[name].astype(object).tolist() if name in summary.columns else [None] * len(summary)
    )


def memory_field(summary: pd.DataFrame) -> str | None:
    """The memory figure shown as 'peak MB': the first of MEMORY_FIELDS that any row has."""
    for name in MEMORY_FIELDS:
        if any(not is_missing(v) for v in _col(summary, f"{name}.mean")):
            return name
    return None


def gpu_short(label: str) -> str:
    """'NVIDIA A100-SXM4-80GB ×2' → 'A100-SXM4-80GB ×2' (summary.csv keeps the full name)."""
    return " + ".join(part.removeprefix("NVIDIA ") for part in label.split(" + "))


def _count(value: Any) -> int:
    return 0 if is_missing(value) else int(value)


def render_table(runs: Runs, summary: pd.DataFrame, width: int = DEFAULT_WIDTH) -> str:
    """The table, a legend when needed, and a footnote; at most ``width`` columns wide."""
    knobs = list(runs.knobs)
    headers = knob_headers(knobs)
    knob_values = {
        k: [format_number(v) if not isinstance(v, str) else v for v in _col(summary, k)]
        for k in knobs
    }
    numeric_knob = {
        k: all(
            is_missing(v) or (isinstance(v, (int, float)) and not isinstance(v, bool))
            for v in _col(summary, k)
        )
        for k in knobs
    }
    if GPU in summary.columns:  # the runs ran on different hardware: say which row is which
        knobs.append(GPU)
        headers[GPU] = "GPU"
        knob_values[GPU] = [gpu_short(str(v)) for v in _col(summary, GPU)]
        numeric_knob[GPU] = False
    mem = memory_field(summary)
    repeated = any((n or 0) >= 2 for n in _col(summary, "n"))
    has_ci = any(not is_missing(h) for m in (TOKS, JTOK) for h in _col(summary, f"{m}.ci95_half"))
    bounded = any(not is_missing(b) for b in _col(summary, f"{JTOK}.{BOUND_SUFFIX}"))
    invalid = [_count(v) for v in _col(summary, N_INVALID)]
    left_out = [_count(v) for v in _col(summary, N_LEFT_OUT)]
    marks = [INVALID_MARK if n else " " for n in invalid] if any(invalid) else [""] * len(summary)

    def metric_columns(with_ci: bool) -> list[_Column]:
        def cells(metric: str, ci: bool) -> list[str]:
            means = _col(summary, f"{metric}.mean")
            halves = _col(summary, f"{metric}.ci95_half")
            if ci:
                return [format_with_ci(m, h) for m, h in zip(means, halves, strict=True)]
            return [format_number(m) for m in means]

        jtok = [c + mark for c, mark in zip(cells(JTOK, with_ci), marks, strict=True)]
        return [
            _Column("tok/s", cells(TOKS, with_ci), True),
            _Column("J/tok", jtok, True),
            _Column("TTFT p50 ms", cells("latency.ttft_ms.p50", False), True),
            _Column("peak MB", cells(mem, False) if mem else [""] * len(summary), True),
            _Column("status", [str(s) for s in _col(summary, "status")], False),
        ]

    def knob_columns(limit: int | None) -> list[_Column]:
        cols = []
        for k in knobs:
            values = knob_values[k]
            if limit is not None and not numeric_knob[k]:
                values = [shorten(v, limit) for v in basenames(values)]
            cols.append(_Column(headers[k], values, numeric_knob[k]))
        return cols

    # wider than the terminal? paths to their last component, then shorten long knob values,
    # then drop the ±, then shorten harder (0: last path component only)
    attempts = [(None, True), (0, True), (32, True), (24, True), (24, False), (16, False)]
    for limit, with_ci in attempts + [(12, False)]:
        with_ci = with_ci and has_ci
        columns = knob_columns(limit) + metric_columns(with_ci)
        if _total_width(columns) <= width:
            break
    legend: list[str] = []
    if _total_width(columns) > width:
        ids = [f"#{i + 1}" for i in range(len(summary))]
        columns = [_Column("config", ids, False)] + metric_columns(with_ci)
        for i, tag in enumerate(ids):
            desc = " ".join(f"{headers[k]}={knob_values[k][i]}" for k in knobs)
            legend.extend(
                textwrap.wrap(f"{tag}  {desc}", width=width, subsequent_indent=" " * (len(tag) + 2))
            )

    lines = _layout(columns)
    if legend:
        lines += [""] + legend
    notes = []
    if with_ci:
        how = "Student t" + (
            "; J/tok adds the runs' mean worst-case uncertainty bound" if bounded else ""
        )
        notes.append(f"mean of ok repeats ± 95% CI half-width ({how})")
    elif repeated or has_ci:
        notes.append("mean of ok repeats (95% CIs in summary.csv)")
    if mem:
        notes.append(f"peak MB = {mem}")
    if notes:
        lines += textwrap.wrap("; ".join(notes), width=width)
    if any(invalid):
        n_inv, n_out = sum(invalid), sum(left_out)
        runs_text = f"{n_inv} run{'s' if n_inv != 1 else ''}"
        if n_out:
            what = (
                f"{runs_text} whose energy was judged invalid: {n_out} left out of J/tok and the "
                "other energy statistics (--include-invalid keeps them)"
            )
        else:
            what = f"{runs_text} whose energy was judged invalid, kept in (--include-invalid)"
        lines += textwrap.wrap(f"{INVALID_MARK} {what}", width=width, subsequent_indent="  ")
    return "\n".join(lines)


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
        lines.extend(
            textwrap.wrap(
                f"{INVALID_MARK} {_where(row)}: {text}", width=width, subsequent_indent="    "
            )
        )
    if len(bad) > MAX_INVALID_LINES:
        rest = len(bad) - MAX_INVALID_LINES
        lines.extend(
            textwrap.wrap(
                f"{INVALID_MARK} and {rest} more run{'s' if rest != 1 else ''} with invalid "
                "energy: see the valid and validity.problems columns of results.csv",
                width=width,
                subsequent_indent="    ",
            )
        )
    return "\n".join(lines)


def _where(row: pd.Series) -> str:
    overrides = row.get("overrides")
    return overrides if isinstance(overrides, str) and overrides else str(row["run_dir"])


def render_problems(runs: Runs, width: int = DEFAULT_WIDTH) -> str:
    """One line (wrapped) per run that is not ok: where it was, what happened, the hint."""
    frame = runs.frame
    lines: list[str] = []
    for _, row in frame.iterrows():
        status = str(row["status"])
        if status == "ok":
            continue
        parts = [f"{status}: {_where(row)}"]
        etype, msg, hint = (row.get(c) for c in ("error.type", "error.message", "error.hint"))
        reason = ": ".join(str(x) for x in (etype, msg) if not is_missing(x) and str(x))
        if reason:
            parts.append(f"— {reason}")
        if not is_missing(hint) and str(hint):
            parts.append(f"(hint: {hint})")
        lines.extend(textwrap.wrap(" ".join(parts), width=width, subsequent_indent="    "))
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
    if GPU in summary.columns:  # rows are configurations × hardware
        kinds = {str(v) for v in _col(summary, GPU) if not is_missing(v) and v != "unknown"}
        text += f" on {len(kinds)} kinds of hardware ({len(summary)} rows)"
    return text

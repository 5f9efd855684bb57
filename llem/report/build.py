"""Build a report: find runs, write results.csv/.parquet and summary.csv, plots, the table."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from llem.atomic import atomic_write
from llem.report.conditions import render_conditions
from llem.report.energy_note import render_gaps
from llem.report.load import Runs, load_runs
from llem.report.notes import DEFAULT_WIDTH, render_heading, render_invalid, render_problems
from llem.report.phase_difference import phase_comparisons
from llem.report.phase_section import render_phase_energy, write_phase_csv
from llem.report.plots import draw_all
from llem.report.search import find_search, write_search_csv
from llem.report.search_section import render_search
from llem.report.speculative_crossover import render_crossover
from llem.report.stats import summary_frame
from llem.report.table import render_table
from llem.report.weights import render_weights

log = logging.getLogger(__name__)

RESULTS_CSV = "results.csv"
RESULTS_PARQUET = "results.parquet"
SUMMARY_CSV = "summary.csv"
PLOTS_DIR = "plots"


@dataclass
class Report:
    runs: Runs
    summary: pd.DataFrame
    out_dir: Path
    text: str  # heading, table, problems: what the CLI prints
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # plots not drawn, with the reason


def build_report(
    dirs: Sequence[Path | str],
    out: Path | str | None = None,
    plots: bool = True,
    width: int = DEFAULT_WIDTH,
    include_invalid: bool = False,
) -> Report:
    """Report on every run under ``dirs``; outputs go to ``out`` (default: the first dir).

    Energy statistics leave out runs whose energy was judged invalid unless ``include_invalid``.

    Raises :class:`llem.report.find.ReportError` when ``dirs`` hold no runs.
    """
    runs = load_runs(dirs)
    out_dir = Path(out) if out is not None else Path(dirs[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summary_frame(runs, include_invalid=include_invalid)

    files: list[Path] = []
    results_csv = out_dir / RESULTS_CSV
    atomic_write(results_csv, lambda p: runs.frame.to_csv(p, index=False))
    files.append(results_csv)
    try:
        results_parquet = out_dir / RESULTS_PARQUET
        atomic_write(results_parquet, lambda p: runs.frame.to_parquet(p, index=False))
        files.append(results_parquet)
    except ImportError as exc:  # pyarrow is a dependency, but do not lose the CSVs over it
        log.warning("results.parquet not written: %s", exc)
    summary_csv = out_dir / SUMMARY_CSV
    atomic_write(summary_csv, lambda p: summary.to_csv(p, index=False))
    files.append(summary_csv)

    phases = phase_comparisons(runs, include_invalid=include_invalid)
    skipped: list[str] = []
    if plots:
        written, skipped = draw_all(runs, summary, out_dir / PLOTS_DIR, phases)
        files.extend(written)
        for reason in skipped:  # printed under the table (llem.report.energy_note)
            log.debug("%s", reason)

    phase_csv = write_phase_csv(phases, out_dir)
    if phase_csv is not None:
        files.append(phase_csv)
    text = _text(
        runs, summary, skipped, width, (out_dir, files), render_phase_energy(phases, width)
    )
    return Report(
        runs=runs,
        summary=summary,
        out_dir=out_dir,
        text=text,
        files=files,
        skipped=skipped,
    )


def _text(
    runs: Runs,
    summary: pd.DataFrame,
    skipped: Sequence[str],
    width: int,
    search_out: tuple[Path, list[Path]],
    phases: str = "",
) -> str:
    """What the report prints: heading, table, then each note that has something to say
    (``phases``: the phase energy by difference, ``llem.report.phase_section``)."""
    parts = [render_heading(runs, summary), "", render_table(runs, summary, width=width)]
    sections = [
        render_invalid(runs, width=width),
        render_gaps(runs, summary, skipped, width=width),
        render_conditions(runs, width=width),
        *_notes(runs, width),
        phases,
        render_crossover(summary, runs.knobs, width),
        render_problems(runs, width=width),
        _search(runs, search_out[0], width, search_out[1]),
    ]
    for section in sections:
        if section:
            parts += ["", section]
    return "\n".join(parts)


def _search(runs: Runs, out_dir: Path, width: int, files: list[Path]) -> str:
    """The search section (llem.report.search), writing search_trials.csv; '' without a search."""
    search = find_search(runs)
    if search is None:
        return ""
    files.append(write_search_csv(search, out_dir))
    return render_search(search, width=width)


def _notes(runs: Runs, width: int) -> list[str]:
    """The notes under the table after the conditions (each '' when it has nothing to say)."""
    return [
        render_settings(runs, width=width),
        render_outside_plan(runs, width=width),
        render_weights(runs, width=width),
    ]


def render_settings(runs: Runs, width: int = DEFAULT_WIDTH) -> str:
    """A note when run-order settings (``sweep.order``, ...) differ between the runs: they are
    not knobs, so every row pools the runs of each order; '' when they do not differ."""
    lines = []
    for key in runs.settings:
        counts: dict[str, int] = {}
        for v in runs.frame[key].astype(object).tolist():
            counts[str(v)] = counts.get(str(v), 0) + 1
        if len(counts) > 1:
            mix = ", ".join(f"{v} ×{n}" for v, n in counts.items())
            lines += textwrap.wrap(
                f"{key} differs between the runs ({mix}): it orders the runs, it is not a knob "
                "of what they measure, so each row pools the runs of every order",
                width=width,
                subsequent_indent="  ",
            )
    return "\n".join(lines)


def render_outside_plan(runs: Runs, width: int = DEFAULT_WIDTH) -> str:
    """The point directories left out because their sweep's plan does not have them (an older
    grid's, from before a re-run with another grid); '' when there are none."""
    if not runs.outside_plan:
        return ""
    names = [_relative(p, runs.roots) for p in runs.outside_plan]
    return "\n".join(
        textwrap.wrap(
            "not in this sweep's plan (an older grid's points, left out of this report): "
            f"{', '.join(names)}",
            width=width,
            subsequent_indent="  ",
        )
    )


def _relative(path: Path, roots: Sequence[Path]) -> str:
    for root in roots:
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return str(path)

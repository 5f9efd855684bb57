"""Fitting the table to the terminal's width: paths to their last component, then the traffic column
and the ``±`` parts left out, then the knobs in a legend and the rest printed in parts; no value or
header is ever cut (``llem.report.layout``)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import pandas as pd

from llem.report.columns import Column, traffic_column
from llem.report.figure_columns import has_bound, metric_columns
from llem.report.knobs import Knobs
from llem.report.layout import split_columns, table_width

#: (paths to their last component, with ±, with the traffic column): tried in turn until the
#: table fits; then the knobs move into a legend (nothing is ever cut: ``llem.report.layout``)
FITS = (
    (False, True, True),
    (True, True, True),
    (True, True, False),
    (True, False, True),
    (True, False, False),
)


@dataclass
class Layout:
    """The table's parts (each a list of columns, printed one under the other), the legend
    under them (knobs that did not fit), whether the ± parts stayed, and what was done to fit."""

    parts: list[list[Column]]
    legend: list[str] = field(default_factory=list)
    plus_minus: bool = True
    said: list[str] = field(default_factory=list)


def fit(summary: pd.DataFrame, knobs: Knobs, width: int, has_ci: bool, mem: str | None) -> Layout:
    """The columns laid out in ``width``: paths to their last component, then the traffic and
    ``±`` parts left out, then the knobs in a legend and the rest split into parts; no value or
    header is ever cut (``llem.report.layout``)."""
    bounded = has_bound(summary)
    traffic = traffic_column(summary, knobs.keys)
    for short_paths, ci, with_traffic in FITS:
        columns = knobs.columns(short_paths) + (traffic if with_traffic else [])
        columns += metric_columns(summary, ci and has_ci, ci and bounded, mem, ci)
        if table_width(columns) <= width:
            said = []
            if short_paths and knobs.shortened():
                said.append(
                    f"{', '.join(knobs.shortened())}: the last path component (full paths in "
                    "summary.csv)"
                )
            if traffic and not with_traffic:
                said.append(f"traffic left out to fit {width} columns (traffic.* in summary.csv)")
            return Layout([columns], [], ci, said)
    rest = traffic + metric_columns(summary, False, False, mem, False)
    keys = knobs.columns(True)
    legend: list[str] = []
    if table_width(keys) > width // 2:  # too wide to repeat: the knobs go into a legend
        ids = [f"#{i + 1}" for i in range(len(summary))]
        for i, tag in enumerate(ids):
            legend += textwrap.wrap(
                f"{tag}  {knobs.describe(i)}", width=width, subsequent_indent=" " * (len(tag) + 2)
            )
        keys = [Column("config", ids, False)]
    parts = split_columns(keys, rest, width)
    said = [f"{', '.join(knobs.shortened())}: the last path component (full paths in summary.csv)"]
    said = said if knobs.shortened() and not legend else []
    if len(parts) > 1:
        which = "config (#N)" if legend else "knobs"
        said.append(
            f"the table is printed in {len(parts)} parts to fit {width} columns, each with the "
            f"{which} of its rows"
        )
    return Layout(parts, legend, False, said)

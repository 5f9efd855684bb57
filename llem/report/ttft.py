"""What a TTFT figure is measured from (``latency.ttft_origin``), in the report: part of what pools
and of what a column means.

The same engine speed gives very different TTFTs from different origins: PyTorch static batches
time each request from its own batch of ``pytorch.batch_size`` (the wait for earlier batches left
out), vLLM's offline ``generate`` from the moment all N prompts were handed over (the wait in the
engine's queue included), a served workload from each request's send (``llem.figures.timelines``).
So runs with different origins are never pooled (``llem.report.ttft_origin``: the origin is part
of ``llem.report.hardware.configuration_groups``' key), and the table never shows two origins under
one header: one origin gets the plain ``TTFT p50 ms`` column and a note naming it; several get
one column each, the origin in the header (``TTFT p50 ms (batch)``), and a note per origin.
"""

from __future__ import annotations

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import Column, col, figure_column
from llem.report.ttft_origin import ORIGIN, TTFT_P50, origin_meaning, origin_name, origin_tag

HEADER = "TTFT p50 ms"


def ttft_origins(summary: pd.DataFrame) -> list[str]:
    """The origins of the summary rows that have a TTFT, in row order."""
    out: list[str] = []
    for origin, value in zip(col(summary, ORIGIN), col(summary, f"{TTFT_P50}.mean"), strict=True):
        if not is_missing(value) and origin_name(origin) not in out:
            out.append(origin_name(origin))
    return out


def ttft_columns(summary: pd.DataFrame) -> list[Column]:
    """``TTFT p50 ms``: one column when every row measures TTFT from the same origin, else one
    column per origin with the origin in its header, each row's figure in its own origin's."""
    origins = ttft_origins(summary)
    if len(origins) <= 1:
        return [figure_column(summary, HEADER, TTFT_P50, False)]
    whole = figure_column(summary, HEADER, TTFT_P50, False)
    rows = [origin_name(o) for o in col(summary, ORIGIN)]
    return [
        Column(
            f"{HEADER} ({origin_tag(origin)})",
            [cell if row == origin else "" for cell, row in zip(whole.cells, rows, strict=True)],
            True,
        )
        for origin in origins
    ]


def ttft_note(summary: pd.DataFrame) -> str | None:
    """What the TTFT column(s) are measured from; None when no row has a TTFT."""
    origins = ttft_origins(summary)
    if not origins:
        return None
    if len(origins) == 1:
        return f"TTFT {origin_meaning(origins[0])}"
    parts = [f"TTFT ({origin_tag(o)}) {origin_meaning(o)}" for o in origins]
    return "; ".join(parts) + ": different origins, never pooled or compared in one column"

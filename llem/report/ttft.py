"""What a TTFT figure is measured from (``latency.ttft_origin``), in the report: part of what pools
and of what a column means.

The same engine speed gives very different TTFTs from different origins: PyTorch static batches
time each request from its own batch of ``pytorch.batch_size`` (the wait for earlier batches left
out), vLLM's offline ``generate`` from the moment all N prompts were handed over (the wait in the
engine's queue included), a served workload from each request's send (``llem.figures.timelines``).
So runs with different origins are never pooled (:func:`origin_of_rows` is part of
``llem.report.hardware.configuration_groups``' key), and the table never shows two origins under
one header: one origin gets the plain ``TTFT p50 ms`` column and a note naming it; several get
one column each, the origin in the header (``TTFT p50 ms (batch)``), and a note per origin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import Column, col, figure_column

ORIGIN = "latency.ttft_origin"
TTFT_P50 = "latency.ttft_ms.p50"
HEADER = "TTFT p50 ms"
UNKNOWN = "not recorded"

#: origin -> (the header's tag, what it means)
ORIGINS: dict[str, tuple[str, str]] = {
    "actual send": ("send", "from each request's actual send (vLLM bench serve)"),
    "batch start": (
        "batch",
        "from the start of the request's own batch (earlier batches' wait left out)",
    ),
    "all prompts at once": ("all", "from all prompts handed over at once (queue wait included)"),
    UNKNOWN: ("?", "origin not recorded"),
}


def _origin(value: Any) -> str:
    return UNKNOWN if is_missing(value) else str(value)


def origin_of_rows(frame: pd.DataFrame) -> list[str | None]:
    """Each run's TTFT origin (None where the run recorded none: failed, skipped, missing)."""
    if ORIGIN not in frame.columns:
        return [None] * len(frame)
    return [None if is_missing(v) else str(v) for v in frame[ORIGIN].astype(object).tolist()]


def _tag(origin: str) -> str:
    return ORIGINS.get(origin, (origin, ""))[0]


def _meaning(origin: str) -> str:
    return ORIGINS.get(origin, ("", f"from the {origin}"))[1]


def ttft_origins(summary: pd.DataFrame) -> list[str]:
    """The origins of the summary rows that have a TTFT, in row order."""
    out: list[str] = []
    for origin, value in zip(col(summary, ORIGIN), col(summary, f"{TTFT_P50}.mean"), strict=True):
        if not is_missing(value) and _origin(origin) not in out:
            out.append(_origin(origin))
    return out


def ttft_columns(summary: pd.DataFrame) -> list[Column]:
    """``TTFT p50 ms``: one column when every row measures TTFT from the same origin, else one
    column per origin with the origin in its header, each row's figure in its own origin's."""
    origins = ttft_origins(summary)
    if len(origins) <= 1:
        return [figure_column(summary, HEADER, TTFT_P50, False)]
    whole = figure_column(summary, HEADER, TTFT_P50, False)
    rows = [_origin(o) for o in col(summary, ORIGIN)]
    return [
        Column(
            f"{HEADER} ({_tag(origin)})",
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
        return f"TTFT {_meaning(origins[0])}"
    parts = [f"TTFT ({_tag(o)}) {_meaning(o)}" for o in origins]
    return "; ".join(parts) + ": different origins, never pooled or compared in one column"


def split_by_origin(keys: Sequence[Any], origins: Sequence[str | None]) -> list[Any]:
    """``keys`` (a pooling key per run) with each run's TTFT origin added; a run that recorded
    none joins its key's only origin, where there is one, so a failed repeat stays in its row."""
    known: dict[Any, set[str]] = {}
    for key, origin in zip(keys, origins, strict=True):
        if origin is not None:
            known.setdefault(key, set()).add(origin)
    out = []
    for key, origin in zip(keys, origins, strict=True):
        if origin is None and len(known.get(key, ())) == 1:
            origin = next(iter(known[key]))
        out.append((key, origin))
    return out

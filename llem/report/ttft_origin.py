"""What a TTFT figure is measured from (``latency.ttft_origin``): the origins the report knows
and what pools (runs with different origins never do; ``llem.report.hardware``). The table's
columns and notes are ``llem.report.ttft``'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from llem.report.cells import is_missing

ORIGIN = "latency.ttft_origin"
TTFT_P50 = "latency.ttft_ms.p50"
NOT_RECORDED = "not recorded"

#: origin -> (the header's tag, what it means)
ORIGINS: dict[str, tuple[str, str]] = {
    "actual send": ("send", "from each request's actual send (vLLM bench serve)"),
    "batch start": (
        "batch",
        "from the start of the request's own batch (earlier batches' wait left out)",
    ),
    "all prompts at once": ("all", "from all prompts handed over at once (queue wait included)"),
    NOT_RECORDED: ("?", "origin not recorded"),
}


def origin_name(value: Any) -> str:
    return NOT_RECORDED if is_missing(value) else str(value)


def origin_of_rows(frame: pd.DataFrame) -> list[str | None]:
    """Each run's TTFT origin (None where the run recorded none: failed, skipped, missing)."""
    if ORIGIN not in frame.columns:
        return [None] * len(frame)
    return [None if is_missing(v) else str(v) for v in frame[ORIGIN].astype(object).tolist()]


def origin_tag(origin: str) -> str:
    return ORIGINS.get(origin, (origin, ""))[0]


def origin_meaning(origin: str) -> str:
    return ORIGINS.get(origin, ("", f"from the {origin}"))[1]


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

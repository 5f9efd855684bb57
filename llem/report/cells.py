"""Cells of the report's tables: what counts as a missing figure, and how a column is typed so
that results.csv and results.parquet agree."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def is_missing(value: Any) -> bool:
    """None, NaN and pandas' NA: a figure that is absent (never to be read as 0)."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def typed_column(values: list[Any]) -> pd.Series:
    """A column whose dtype keeps ints as ints even with gaps (Int64), bools as ``boolean``.

    Columns mixing numbers and strings become strings, so that CSV and Parquet agree.
    """
    clean = [None if is_missing(v) else v for v in values]
    present = [v for v in clean if v is not None]
    if not present:
        return pd.Series(clean, dtype="object")
    if all(isinstance(v, bool) for v in present):
        return pd.Series(clean, dtype="boolean")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.Series(clean, dtype="Int64")
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pd.Series([float("nan") if v is None else float(v) for v in clean], dtype="float64")
    return pd.Series([None if v is None else str(v) for v in clean], dtype="string")

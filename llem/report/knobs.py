"""The knob columns of the table: the knobs that vary in the loaded runs (and ``GPU`` when the runs
ran on different hardware), their headers and cells, paths shortened where they stay distinct."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import Column, col
from llem.report.hardware import GPU
from llem.report.labels import basenames, format_number, gpu_short, knob_headers
from llem.report.load import Runs


@dataclass(frozen=True)
class Knobs:
    """The knob columns' headers and cells, before shortening."""

    keys: list[str]
    headers: dict[str, str]
    cells: dict[str, list[str]]
    numeric: dict[str, bool]

    def columns(self, short_paths: bool) -> list[Column]:
        """The knob columns; with ``short_paths``, path-like values as their last component
        (where those stay distinct: ``labels.basenames``)."""
        cols = []
        for k in self.keys:
            cells = self.cells[k]
            if short_paths and not self.numeric[k]:
                cells = basenames(cells)
            cols.append(Column(self.headers[k], cells, self.numeric[k]))
        return cols

    def shortened(self) -> list[str]:
        """The headers of the knob columns whose values ``columns(True)`` shortens."""
        return [
            self.headers[k]
            for k in self.keys
            if not self.numeric[k] and basenames(self.cells[k]) != self.cells[k]
        ]

    def describe(self, i: int) -> str:
        return " ".join(f"{self.headers[k]}={self.cells[k][i]}" for k in self.keys)


def knobs(runs: Runs, summary: pd.DataFrame) -> Knobs:
    keys = list(runs.knobs)
    headers = knob_headers(keys)
    cells = {
        k: [format_number(v) if not isinstance(v, str) else v for v in col(summary, k)]
        for k in keys
    }
    numeric = {
        k: all(
            is_missing(v) or (isinstance(v, (int, float)) and not isinstance(v, bool))
            for v in col(summary, k)
        )
        for k in keys
    }
    if GPU in summary.columns:  # the runs ran on different hardware: say which row is which
        keys.append(GPU)
        headers[GPU] = "GPU"
        cells[GPU] = [gpu_short(str(v)) for v in col(summary, GPU)]
        numeric[GPU] = False
    return Knobs(keys, headers, cells, numeric)

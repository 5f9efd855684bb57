"""The printed table's footprint columns (result.json's ``footprint``, ``docs/footprint.md``):
grams of CO2e per 1,000 output tokens, and the energy and capacity costs per million output
tokens, apart. Each appears only where some row has it, so a table of runs that asked for none
is what it was before.

A row whose carbon and energy cost come from a modelled layer (``footprint.layer_label``, part
of the row's identity) says so in its cells: ``0.21 (modelled)``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import Column, col, figure_column
from llem.report.footprint_metrics import CAPACITY_USD, ENERGY_USD, G_PER_1K, LAYER_LABEL


def _labelled(column: Column, labels: list[Any]) -> Column:
    cells = [
        f"{c} (modelled)" if c and not is_missing(lab) and lab == "modelled" else c
        for c, lab in zip(column.cells, labels, strict=True)
    ]
    return Column(column.header, cells, column.right)


def footprint_columns(summary: pd.DataFrame, with_ci: bool) -> list[Column]:
    """``gCO2e/1k tok``, ``USD/M tok energy`` and ``USD/M tok capacity``, where some row has
    them; the carbon and energy cells of a modelled layer say ``(modelled)``."""
    labels = col(summary, LAYER_LABEL)
    out = []
    for header, metric, layered in (
        ("gCO2e/1k tok", G_PER_1K, True),
        ("USD/M tok energy", ENERGY_USD, True),
        ("USD/M tok capacity", CAPACITY_USD, False),
    ):
        if any(not is_missing(v) for v in col(summary, f"{metric}.mean")):
            column = figure_column(summary, header, metric, with_ci)
            out.append(_labelled(column, labels) if layered else column)
    return out

"""Lay the table's columns out with rich so that no value and no header is ever cut.

rich shrinks a table wider than its console by cutting cells to ``…``: two rows of ``0.5…`` then
read alike although they hold 0.511 and 0.566. Here a table is measured first and drawn at its
own width, never narrower; when the columns do not fit in the width asked for, they are split into
parts printed one under the other, each repeating the key columns (the knobs, or the ``#N`` of the
legend) that say which row is which (:func:`split_columns`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from llem.report.columns import Column


def rich_table(columns: Sequence[Column]) -> Any:
    """A rich Table: two spaces between columns, a dashed rule under the header, no edges."""
    from rich.box import Box
    from rich.table import Table
    from rich.text import Text

    rule = Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)
    table = Table(box=rule, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), header_style="")
    for c in columns:  # Text, not str: knob values are never read as rich markup
        table.add_column(Text(c.header), justify="right" if c.right else "left", no_wrap=True)
    for row in zip(*(c.cells for c in columns), strict=True):
        table.add_row(*(Text(cell) for cell in row))
    return table


def _console(width: int) -> Any:
    from rich.console import Console

    return Console(
        file=io.StringIO(),
        width=width,
        color_system=None,
        force_terminal=False,
        no_color=True,
        highlight=False,
        emoji=False,
        legacy_windows=False,
    )


def table_width(columns: Sequence[Column]) -> int:
    """The columns the table takes when nothing in it is cut."""
    return int(_console(10_000).measure(rich_table(columns)).maximum)


def table_lines(columns: Sequence[Column]) -> list[str]:
    """The table drawn at its full width: rich never gets to cut a cell or a header."""
    console = _console(max(1, table_width(columns)))
    console.print(rich_table(columns))
    return [line.rstrip() for line in console.file.getvalue().splitlines()]


def split_columns(keys: Sequence[Column], rest: Sequence[Column], width: int) -> list[list[Column]]:
    """``rest`` in order, packed into parts that each fit in ``width`` after the ``keys``
    columns; a column too wide to fit even alone beside them gets a part of its own (wider than
    ``width``, never cut)."""
    parts: list[list[Column]] = []
    current: list[Column] = []
    for column in rest:
        if current and table_width([*keys, *current, column]) > width:
            parts.append([*keys, *current])
            current = []
        current.append(column)
    if current or not parts:
        parts.append([*keys, *current])
    return parts

"""``<sweep dir>/superseded/<time>/<n>``: where a point directory goes when a new run needs its
place (an older result of another configuration, a failed or unfinished attempt). Nothing is
deleted: the grid's and the search's resume both move such directories here, and the report does
not read them."""

from __future__ import annotations

import shutil
from pathlib import Path

from llem.result import utc_now

SUPERSEDED_DIR = "superseded"


def supersede_stamp() -> str:
    """The ``<time>`` folder name for one sweep's start."""
    return utc_now().replace(":", "-")


def supersede(directory: Path, index: int, stamp: str) -> Path:
    """Move point ``index``'s directory aside to ``<sweep dir>/superseded/<stamp>/<index>``;
    returns where it went."""
    target = directory.parent / SUPERSEDED_DIR / stamp / str(index)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(directory), str(target))
    return target

"""The ``sweep:`` group: how a ``--multirun`` is ordered and run."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from llem.config.knobs import LLEM, knob


class SweepOrder(Enum):
    grouped = "grouped"
    interleave = "interleave"
    shuffle = "shuffle"


@dataclass
class SweepConfig:
    order: SweepOrder = knob(
        SweepOrder.grouped,
        doc="Run order of a --multirun: by loaded model, repeat rounds interleaved, or shuffled.",
        goes_to=LLEM,
    )
    seed: int = knob(0, doc="Seed of order=shuffle.", goes_to=LLEM)
    reuse_model: bool = knob(
        True,
        doc="Consecutive points with the same load settings share one loaded model.",
        goes_to=LLEM,
    )

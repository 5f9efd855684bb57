"""A sweep plan's model loads: which points of its run order load a model, and an estimate of
the time those loads will take, from the load times measured on this host before
(``llem.runner.load_times``).

With model reuse, a point whose load key equals the previous point's keeps that model; every
other point loads one. Each load counts the median of its load key's recorded times; a load whose
key was never measured on this host is unknown: it is counted as such, never as 0 or a guess. For
a server that llem launches, the load is the launch to ready.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from llem.sweep.progress import fmt_s


class Loading(Protocol):
    """A point of a run order, as far as its load goes (``llem.sweep.plan.Point``)."""

    @property
    def load_key(self) -> str | None: ...

    @property
    def launches(self) -> bool: ...  # its load launches a server


L = TypeVar("L", bound=Loading)


def loads_in_order(run: Sequence[L], reuse: bool) -> list[L]:
    """The points of ``run`` (in run order) that load a model."""
    return [p for k, p in enumerate(run) if not (reuse and k and p.load_key == run[k - 1].load_key)]


@dataclass(frozen=True)
class LoadEstimate:
    loads: int  # the loads of the run order
    known: int  # those whose load key has load times measured on this host
    known_s: float  # the sum of their medians (s)
    launches: bool  # some of the loads launch a server (their time: launch to ready)

    def text(self) -> str:
        """The clause that ends the plan's line: '' when no load was measured here before."""
        if not self.known:
            return ""
        what = "loading or server launch to ready" if self.launches else "loading"
        took = "under 1s" if self.known_s < 1 else f"about {fmt_s(self.known_s)}"
        if self.known == self.loads:
            return f", {took} of {what} (the median of this host's earlier loads)"
        unknown = self.loads - self.known
        return (
            f", {took} of {what} for the {self.known} measured on this host before; "
            f"{unknown} not measured here yet (unknown)"
        )


def estimate_loads(
    loads: Sequence[Loading], measured: Mapping[str, Sequence[float]]
) -> LoadEstimate:
    """The estimate for ``loads`` (the points that load, ``loads_in_order``), from ``measured``:
    this host's load times (s) by load key."""
    keys = [p.load_key for p in loads]
    medians = [statistics.median(measured[k]) for k in keys if k is not None and measured.get(k)]
    launches = any(p.launches for p in loads)
    return LoadEstimate(len(keys), len(medians), float(sum(medians)), launches)

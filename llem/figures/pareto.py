"""The Pareto front of points in two figures: those no other point beats on both."""

from __future__ import annotations

from collections.abc import Sequence


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points that no other point beats on both figures: a higher first (tokens/s)
    and a lower second (J/token). Equal points beat neither other."""
    front = []
    for i, (t, j) in enumerate(points):
        dominated = any(
            (t2 >= t and j2 <= j) and (t2 > t or j2 < j)
            for k, (t2, j2) in enumerate(points)
            if k != i
        )
        if not dominated:
            front.append(i)
    return front

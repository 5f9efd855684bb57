"""The order a sweep runs its pending points in: grouped, interleaved or shuffled."""

from __future__ import annotations

import random
from collections import OrderedDict

from llem.config.schema import SweepOrder
from llem.sweep.plan import Point


def order_points(points: list[Point], order: SweepOrder, seed: int) -> list[int]:
    """Indices of the pending points in run order.

    grouped: points sharing a load key run back to back (groups in order of first appearance);
    interleave: repeat rounds one after another (every configuration's repeat 0, then repeat 1,
    ...), grouped by load key within a round, so drift over time spreads evenly across
    configurations;
    shuffle: a seeded random permutation.

    In grouped and interleave orders, a sweep over ``gpu.power_limit_w`` runs each group's points
    in power-limit order, rising in one group and falling in the next (``by_power_limit``), so
    that the GPU steps between neighbouring limits instead of jumping from the highest to the
    lowest between two points.
    """
    pending = [p for p in points if p.status == "pending"]

    def grouped(items: list[Point]) -> list[list[Point]]:
        groups: OrderedDict[str | None, list[Point]] = OrderedDict()
        for p in items:
            groups.setdefault(p.load_key, []).append(p)
        return list(groups.values())

    chosen: list[list[Point]] | None = None
    if order == SweepOrder.grouped:
        chosen = grouped(pending)
    if order == SweepOrder.interleave:
        rounds: dict[int, list[Point]] = {}
        for p in pending:
            rounds.setdefault(p.repeat, []).append(p)
        chosen = [g for r in sorted(rounds) for g in grouped(rounds[r])]
    if chosen is not None:
        return [p.index for members in by_power_limit(chosen) for p in members]
    indices = [p.index for p in pending]
    random.Random(seed).shuffle(indices)
    return indices


def by_power_limit(groups: list[list[Point]]) -> list[list[Point]]:
    """Each group's points in power-limit order (a stable sort: points of one limit keep their
    order), rising in the first group with a power limit, falling in the next, and so on; points
    without a limit (the GPU left as it is) keep their place at the end of their group."""
    out, rising = [], True
    for members in groups:
        limits = [p.power_limit_w for p in members if p.power_limit_w is not None]
        if len(set(limits)) < 2:
            out.append(members)
            continue
        sign = 1.0 if rising else -1.0
        with_limit = sorted(
            (p for p in members if p.power_limit_w is not None),
            key=lambda p: sign * (p.power_limit_w or 0.0),
        )
        out.append(with_limit + [p for p in members if p.power_limit_w is None])
        rising = not rising
    return out

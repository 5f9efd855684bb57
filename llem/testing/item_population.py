"""A planted population of items for the quality interval's coverage: the truth is the
population's accuracy ``p``, set by hand, never computed by the code under test.

Each simulated run draws ``n_items`` items from the population and answers each ``passes`` times.
Greedy decoding: an item's answer is right with probability ``p`` and every pass repeats it.
Sampled decoding: each item has its own probability of a right answer, drawn from a Beta
distribution whose mean is ``p`` (``spread`` = 1 / (a + b): the larger, the more items differ), and
each pass draws anew.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

IntervalMethod = Callable[[Sequence[tuple[int, int]]], tuple[float, float] | None]


@dataclass(frozen=True)
class Population:
    p: float  # the planted accuracy over the population of items
    sampled: bool  # False: greedy (every pass repeats an item's answer)
    spread: float = 0.5  # sampled: 1 / (a + b) of the items' Beta distribution

    def draw(self, rng: random.Random, n_items: int, passes: int) -> list[tuple[int, int]]:
        """One run's (right, answers) per item."""
        out = []
        for _ in range(n_items):
            if self.sampled:
                ab = 1.0 / self.spread
                q = rng.betavariate(self.p * ab, (1 - self.p) * ab)
                right = sum(rng.random() < q for _ in range(passes))
            else:
                right = passes if rng.random() < self.p else 0
            out.append((right, passes))
        return out


def coverage(
    interval: IntervalMethod, pop: Population, n_items: int, passes: int, runs: int, seed: int = 0
) -> float:
    """The share of ``runs`` simulated runs whose interval holds the planted ``pop.p``."""
    rng = random.Random(seed)
    held = 0
    for _ in range(runs):
        got = interval(pop.draw(rng, n_items, passes))
        held += got is not None and got[0] <= pop.p <= got[1]
    return held / runs


def over_answers(items: Sequence[tuple[int, int]]) -> tuple[float, float] | None:
    """Wilson's interval over every answer as if independent (llem's interval before schema 8)."""
    from llem.quality.interval import wilson

    return wilson(sum(r for r, _ in items), sum(n for _, n in items))


def interval_over_items(items: Sequence[tuple[int, int]]) -> tuple[float, float] | None:
    """llem's interval over items, as (low, high)."""
    from llem.quality.interval import over_items as llem_over_items

    got = llem_over_items(items)
    return None if got is None else (got.low, got.high)

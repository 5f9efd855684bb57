"""The 95% interval of a proportion: Wilson's score interval.

Wilson's interval keeps close to its nominal coverage for small samples and proportions near 0 or
1, where the normal ("Wald") interval collapses to a width of zero at 0 of n or n of n.
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
METHOD = "Wilson score interval, 95%"


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The interval (low, high) of the proportion ``correct / n``; None when nothing was scored."""
    if n < 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n, got correct={correct}, n={n}")
    if n == 0:
        return None
    p = correct / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = 0.0 if correct == 0 else max(0.0, centre - half)  # exact ends where rounding drifts
    high = 1.0 if correct == n else min(1.0, centre + half)
    return low, high

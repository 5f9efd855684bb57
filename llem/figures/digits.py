"""A measured figure as printed: its significant digits only, never in exponent form.

``plain(17.42)`` is ``17.4``, ``plain(0.01234)`` ``0.0123``, ``plain(11934.2)`` ``11934``: a
figure of ``10**digits`` or more keeps its whole units, as rounding them away would print zeros
that were never measured.
"""

from __future__ import annotations

import math


def plain(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant digits (its whole units when it has more), without an
    exponent and without trailing zeros after the point."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text

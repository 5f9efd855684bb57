"""How figures and knob values are written in the table and on the plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from llem.report.cells import is_missing


def format_number(value: Any, sig: int = 3) -> str:
    """Compact, fixed-point: 386.0 → '386', 22.51 → '22.5', 0.2051 → '0.205', None → ''."""
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    x = float(value)
    if not math.isfinite(x):
        return ""
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1e7 or ax < 1e-3:
        return f"{x:.{sig - 1}e}"
    return f"{x:.{_decimals(ax, sig)}f}"


def _decimals(ax: float, sig: int) -> int:
    return max(0, sig - 1 - math.floor(math.log10(ax)))


def format_with_ci(mean: Any, half: Any, sig: int = 3) -> str:
    """'386 ±19': the half-width to the mean's precision (one significant digit if that gives 0)."""
    text = format_number(mean, sig)
    if not text or is_missing(half) or "e" in text:
        return text
    h = abs(float(half))
    decimals = _decimals(abs(float(mean)), sig) if float(mean) != 0 else sig
    if h > 0 and round(h, decimals) == 0:
        decimals = _decimals(h, 1)  # one significant digit rather than '±0'
    return f"{text} ±{h:.{decimals}f}"


def knob_headers(knobs: Sequence[str]) -> dict[str, str]:
    """Short, unambiguous headers: 'pytorch.batch_size' → 'batch_size'."""
    parts = {k: k.replace("/", ".").split(".") for k in knobs}
    depth = {k: 1 for k in knobs}
    while True:
        short = {k: ".".join(parts[k][-depth[k] :]) for k in knobs}
        clashes = [k for k in knobs if list(short.values()).count(short[k]) > 1]
        grow = [k for k in clashes if depth[k] < len(parts[k])]
        if not grow:
            return short
        for k in grow:
            depth[k] += 1


def basenames(values: Sequence[str]) -> list[str]:
    """Path-like values to their last component, when those stay distinct."""
    short = [v.rstrip("/").rsplit("/", 1)[-1] or v if "/" in v else v for v in values]
    return short if len(set(short)) == len(set(values)) else list(values)


def shorten(text: str, limit: int) -> str:
    """A middle ellipsis that keeps both ends ('Qwen2.5…tuned-0'); 0 means no limit."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = (limit - 1 + 1) // 2
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def gpu_short(label: str) -> str:
    """'NVIDIA A100-SXM4-80GB ×2' → 'A100-SXM4-80GB ×2' (summary.csv keeps the full name)."""
    return " + ".join(part.removeprefix("NVIDIA ") for part in label.split(" + "))

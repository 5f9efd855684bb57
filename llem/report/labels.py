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


#: the ± part's significant digits (never more decimals than the mean shows)
CI_DIGITS = 2
#: a half-width at least this fraction of the mean is flagged as wide (see :func:`ci_is_wide`)
WIDE_CI = 0.5


def format_with_ci(mean: Any, half: Any, sig: int = 3) -> str:
    """The mean to ``sig`` significant digits, then ``±`` the half-width to 2 significant digits,
    never to more decimals than the mean shows, so the two read at one precision.

    A half-width that rounds to nothing at the mean's precision is written as a limit, not as a
    string of zeros: ``4.09 ±<0.01`` (half-width 4e-9). An exact zero (identical repeats) is
    ``±0`` at the mean's precision. Examples: ``386 ±19`` (18.52), ``12.0 ±5.0`` (4.9683),
    ``22.5 ±0.4`` (0.36), ``4.09 ±52`` (52.3), ``5.00e-04 ±2.1e-05`` (a mean in e-notation).
    No mean, no text; no half-width, the mean alone.
    """
    text = format_number(mean, sig)
    if not text or is_missing(half) or isinstance(mean, bool):
        return text
    h = abs(float(half))
    if not math.isfinite(h):
        return text
    if "e" in text:
        return f"{text} ±{h:.{CI_DIGITS - 1}e}" if h else f"{text} ±0"
    shown = _decimals(abs(float(mean)), sig) if float(mean) != 0 and "." in text else 0
    if h == 0:
        return f"{text} ±{0:.{shown}f}"
    decimals = min(shown, CI_DIGITS - 1 - math.floor(math.log10(h)))
    rounded = round(h, decimals)
    if rounded == 0:
        return f"{text} ±<{10.0**-decimals:.{max(decimals, 0)}f}"
    return f"{text} ±{rounded:.{max(decimals, 0)}f}"


def ci_is_wide(mean: Any, half: Any) -> bool:
    """A 95% half-width of at least half the mean: the repeats pin the mean down only to within
    a factor of three or worse (two repeats multiply their spread by Student's t = 12.7)."""
    if is_missing(mean) or is_missing(half):
        return False
    m, h = abs(float(mean)), abs(float(half))
    return math.isfinite(h) and math.isfinite(m) and h > 0 and h >= WIDE_CI * m


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


#: a figure's or knob's name ending -> the unit of its values
UNIT_ENDINGS = {
    "_ms": "ms",
    "_s": "s",
    "_j": "J",
    "_w": "W",
    "_mb": "MB",
    "_mhz": "MHz",
    "_c": "°C",
}
#: the parts of a ``X_per_Y`` figure name that read as units
_PART_UNITS = {"j": "J", "kj": "kJ", "wh": "Wh", "s": "s", "w": "W"}
#: figures whose name spells no unit, by key: the share of answers judged correct and its ends
NAMED_UNITS = dict.fromkeys(
    ("quality.value", "quality.ci95_low", "quality.ci95_high"), "proportion correct, 0-1"
)
#: the knob endings whose unit a plot's axis spells out ("gpu.power_limit_w (W)")
KNOB_UNITS = {ending: UNIT_ENDINGS[ending] for ending in ("_w", "_mhz")}


def figure_unit(key: str) -> str | None:
    """The unit a result key's name spells: 'latency.ttft_ms.p90' → 'ms',
    'energy.j_per_output_token' → 'J/output token', 'throughput.output_tokens_per_s' →
    'output tokens/s'; None where the name has none."""
    if key in NAMED_UNITS:
        return NAMED_UNITS[key]
    parts = key.split(".")
    name = parts[-2] if parts[-1].startswith("p") and parts[-1][1:].isdigit() else parts[-1]
    if "_per_" in name:
        top, _, per = name.partition("_per_")
        return f"{_unit_part(top)}/{_unit_part(per)}"
    return next((unit for end, unit in UNIT_ENDINGS.items() if name.endswith(end)), None)


def _unit_part(part: str) -> str:
    if part.endswith("bytes"):
        return "B"
    return _PART_UNITS.get(part, part.replace("_", " "))


def figure_axis_label(key: str) -> str:
    """A result key with the unit its name spells: 'latency.ttft_ms.p90 (ms)'."""
    unit = figure_unit(key)
    return f"{key} ({unit})" if unit else key


def knob_axis_label(knob: str) -> str:
    """The knob's key, with the unit its name ends in spelled out: 'gpu.power_limit_w (W)'."""
    for ending, unit in KNOB_UNITS.items():
        if knob.endswith(ending):
            return f"{knob} ({unit})"
    return knob


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

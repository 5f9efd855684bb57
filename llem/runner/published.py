"""A figure published with its bound and its 95 % interval, or null with the reason where the
interval is wider than the figure itself (the attribution's phases, a request's energy, the
draft's energy)."""

from __future__ import annotations

from llem.result import Figure

UNRESOLVED = "not resolvable at this sampling rate and window"


def unresolved(value: float, half: float, unit: str = "J") -> str | None:
    """Why a figure whose 95 % interval is wider than the figure itself is null (None: it is
    not)."""
    if 2 * half <= abs(value):
        return None
    return (
        f"{UNRESOLVED}: its 95 % interval, {value:.4g} ± {half:.2g} {unit}, is wider than the "
        "figure"
    )


def with_interval(
    value: float | None,
    bound: float | None,
    half: float | None,
    interval_why: str | None,
    null_reason: str | None = None,
    unit: str = "J",
) -> Figure:
    """The figure with its bound and its interval; null with the reason where the interval is
    wider than the figure (``unresolved``)."""
    if value is not None and half is not None:
        why = unresolved(value, half, unit)
        if why is not None:
            return Figure.null(why)
    return Figure.of(value, null_reason, bound, None, half, interval_why or "not measured")

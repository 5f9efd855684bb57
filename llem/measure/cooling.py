"""Waiting for devices to cool back to their idle temperature, before a baseline or a window.

``wait_until_cool`` polls the devices' temperatures every 0.5 s until each one whose idle
temperature is known is at most a margin above it, for a limit at most, and says how it ended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from llem.measure.sampler import Clock

POLL_S = 0.5


@dataclass(frozen=True)
class Cooling:
    """The outcome of waiting for devices to cool: seconds waited, last temperatures, the devices
    still too hot (uuid -> C) when the wait ran out."""

    waited_s: float
    temperatures_c: dict[str, float | None]
    still_hot: dict[str, float]


def wait_until_cool(
    temperatures: Callable[[], dict[str, float | None]],
    clock: Clock,
    limit_s: float,
    idle_c: Mapping[str, float],
    margin_c: float,
) -> Cooling:
    """Poll ``temperatures()`` (uuid -> C) every 0.5 s until each device with a known idle
    temperature (``idle_c``) is at most ``margin_c`` above it, for ``limit_s`` at most."""
    t0 = clock.now()
    while True:
        temps = temperatures()
        hot = {
            u: t
            for u, t in temps.items()
            if t is not None and u in idle_c and t > idle_c[u] + margin_c
        }
        left = limit_s - (clock.now() - t0)
        if not hot or left <= 0:
            return Cooling(clock.now() - t0, temps, hot)
        clock.sleep(min(POLL_S, left))

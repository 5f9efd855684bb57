"""Clock throttle reasons: which of them count as throttling, and how a window's are summed up.

Each vendor's reader names why the clocks are below their maximum (``Sample.throttle_reasons``,
of ``llem.devices.readings.THROTTLE_REASONS``). Only some reasons mean the measurement was
throttled by heat or power: ``gpu_idle`` or an application clock setting are normal and do not
count. Of those that do, a hardware or thermal slowdown invalidates the energy figure
(``SLOWDOWN_REASONS``) and a power cap is only recorded (``POWER_CAP_REASONS``); the comments below
say why.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from llem.devices.readings import THROTTLE_REASONS

# Reasons that invalidate a window's energy: the GPU was slowed by a fault or by heat beyond its
# operating range, so the figure describes that event (a failing fan, a hot rack, a power supply
# asserting its brake), not the configuration, and a repeat on a healthy GPU would differ.
# hw_slowdown fires on over-temperature, an external power brake or excess power draw and halves the
# clocks or more; hw_power_brake_slowdown is the external brake signal (system or power supply);
# sw/hw_thermal_slowdown mean the GPU or its memory ran above its maximum operating temperature.
SLOWDOWN_REASONS = frozenset(
    {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)

# Reasons that are a condition of the measurement, recorded and never invalidating: the driver holds
# the board at its power limit. That is the normal state of many cards (L4, A10, PCIe parts) and of
# big batches on any card, reproducible for the card and configuration; a figure measured at the cap
# is a true figure for it (see ``thermal.power_capped_fraction``).
POWER_CAP_REASONS = frozenset({"sw_power_cap"})

# Reasons that mean heat or power held the clocks down (``thermal.throttled``).
THROTTLING_REASONS = SLOWDOWN_REASONS | POWER_CAP_REASONS

_ORDER = {name: i for i, name in enumerate(THROTTLE_REASONS)}


def sort_reasons(names: Iterable[str]) -> list[str]:
    """Distinct reason names, known ones in ``THROTTLE_REASONS``' order first, unknown ones
    after, sorted."""
    return sorted(set(names), key=lambda n: (_ORDER.get(n, len(_ORDER)), n))


def is_throttling(names: Iterable[str]) -> bool:
    """True when any thermal or power reason is among ``names``."""
    return any(n in THROTTLING_REASONS for n in names)


def power_cap_shares(readings: Sequence[Collection[str]]) -> tuple[float | None, dict[str, float]]:
    """The share of ``readings`` (one throttle reading per device sample: its reasons) with a
    power-cap reason, and the share per power-cap reason; (None, {}) without readings."""
    if not readings:
        return None, {}
    names = [set(r) & POWER_CAP_REASONS for r in readings]
    per_reason = {
        r: sum(r in n for n in names) / len(readings) for r in sort_reasons(set().union(*names))
    }
    return sum(bool(n) for n in names) / len(readings), per_reason

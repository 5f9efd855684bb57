"""Clock throttle ("clock event") reasons: decode NVML's bitmask into names.

``nvmlDeviceGetCurrentClocksEventReasons`` (and its older name
``nvmlDeviceGetCurrentClocksThrottleReasons``) return a bitmask of why the clocks are below their
maximum. Only some reasons mean the measurement was throttled by heat or power: ``gpu_idle`` or an
application clock setting are normal and do not count. Of those that do, a hardware or thermal
slowdown invalidates the energy figure (``SLOWDOWN_REASONS``) and a power cap is only recorded
(``POWER_CAP_REASONS``); the comments below say why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# Bit values as in nvml.h (nvmlClocksEventReason*); the same under both API names.
REASON_BITS = {
    "gpu_idle": 0x001,
    "applications_clocks_setting": 0x002,
    "sw_power_cap": 0x004,
    "hw_slowdown": 0x008,
    "sync_boost": 0x010,
    "sw_thermal_slowdown": 0x020,
    "hw_thermal_slowdown": 0x040,
    "hw_power_brake_slowdown": 0x080,
    "display_clock_setting": 0x100,
}

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

_ORDER = {name: i for i, name in enumerate(REASON_BITS)}


def decode_reasons(mask: int | None) -> list[str]:
    """Names of the bits set in ``mask``, in bit order; unknown bits as ``unknown_0x...``."""
    if not mask:
        return []
    names = [name for name, bit in REASON_BITS.items() if mask & bit]
    known = 0
    for bit in REASON_BITS.values():
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"unknown_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def sort_reasons(names: Iterable[str]) -> list[str]:
    """Distinct reason names, known ones in bit order first, unknown ones after, sorted."""
    return sorted(set(names), key=lambda n: (_ORDER.get(n, len(_ORDER)), n))


def is_throttling(names: Iterable[str]) -> bool:
    """True when any thermal or power reason is among ``names``."""
    return any(n in THROTTLING_REASONS for n in names)


def power_cap_shares(masks: Sequence[int]) -> tuple[float | None, dict[str, float]]:
    """The share of ``masks`` (one throttle reading per device sample) with a power-cap reason,
    and the share per power-cap reason; (None, {}) without readings."""
    if not masks:
        return None, {}
    names = [set(decode_reasons(m)) & POWER_CAP_REASONS for m in masks]
    per_reason = {
        r: sum(r in n for n in names) / len(masks) for r in sort_reasons(set().union(*names))
    }
    return sum(bool(n) for n in names) / len(masks), per_reason

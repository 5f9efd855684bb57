"""Clock throttle ("clock event") reasons: decode NVML's bitmask into names.

``nvmlDeviceGetCurrentClocksEventReasons`` (and its older name
``nvmlDeviceGetCurrentClocksThrottleReasons``) return a bitmask of why the clocks are below their
maximum. Only some reasons mean the measurement was throttled by heat or power: ``gpu_idle`` or an
application clock setting are normal and do not count.
"""

from __future__ import annotations

from collections.abc import Iterable

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

# Reasons that mean heat or power held the clocks down (hw_slowdown fires on over-temperature,
# external power brake or excess power draw, so it counts too).
THROTTLING_REASONS = frozenset(
    {
        "sw_power_cap",
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    }
)

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

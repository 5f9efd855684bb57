"""What a GPU reading is, whatever the vendor: one sample of a device, and a process on it.

The vendor modules (``nvidia``, ``amd``) fill these in their own units converted once: W, J, MHz,
degrees C, MB (2**20 bytes, the unit of torch's memory figures). ``throttle_reasons`` are names of
``THROTTLE_REASONS``, each vendor's reader mapping its own bits or flags onto them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MB = float(2**20)  # bytes in a MB, as every vendor's memory figures are shown

#: Why a GPU's clocks are below their maximum, whatever the vendor, in the order llem lists them
#: (result.json's ``thermal.throttle_reasons``, timeseries.csv's ``throttle_reasons``). A reason a
#: vendor reports that is none of these is ``unknown_<the vendor's code>``.
THROTTLE_REASONS = (
    "gpu_idle",  # nothing to run
    "applications_clocks_setting",  # clocks set by the user or an application
    "sw_power_cap",  # the driver holds the board at its power limit
    "hw_slowdown",  # a hardware slowdown: over-temperature, a power brake or excess draw
    "sync_boost",  # clocks held down to match other GPUs of a sync-boost group
    "sw_thermal_slowdown",  # the GPU or its memory at its temperature limit
    "hw_thermal_slowdown",  # a hardware thermal signal (NVIDIA's thermal slowdown, AMD's PROCHOT)
    "hw_power_brake_slowdown",  # an external power brake (the system or its power supply)
    "display_clock_setting",  # clocks held by the display
)


@dataclass(frozen=True)
class Sample:
    """One reading of one device. ``time_s`` is on the session clock; None = not readable."""

    time_s: float
    device: str  # the GPU's UUID (or the replay trace's device name)
    power_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    throttle_reasons: tuple[str, ...] | None = None  # of THROTTLE_REASONS; () = at full clocks
    memory_used_mb: float | None = None  # MB = 2**20 bytes
    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None
    # (column, error text) for each reading that failed in this sample; its column is None
    errors: tuple[tuple[str, str], ...] = ()


class SecondaryReadings:
    """One GPU's readings other than its energy figure's own (temperature, clocks, memory,
    utilisation, throttle reasons): each is None when the vendor library does not support it
    (from then on) or fails now, the failure kept as ``(column, error text)`` in the sample's
    ``errors``; it never voids the energy. Anything but the library's own error propagates."""

    def __init__(
        self,
        is_not_supported: Callable[[BaseException], bool],
        is_error: Callable[[BaseException], bool],
        error_text: Callable[[BaseException], str],
    ) -> None:
        self._is_not_supported, self._is_error, self._error_text = (
            is_not_supported,
            is_error,
            error_text,
        )
        self._unsupported: set[str] = set()

    def read(
        self, key: str, fn: Callable[[], Any], errors: list[tuple[str, str]], *columns: str
    ) -> Any:
        if key in self._unsupported:
            return None
        try:
            return fn()
        except Exception as exc:
            if self._is_not_supported(exc):
                self._unsupported.add(key)
                return None
            if not self._is_error(exc):
                raise
            errors.extend((c, self._error_text(exc)) for c in columns)
            return None

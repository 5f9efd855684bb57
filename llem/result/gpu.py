"""result.json's ``gpu`` section: the power limit and clocks a run asked for, got and put back.

Null (with the reason in ``null_reasons``) when the run left the GPU as it was (every ``gpu.*``
null). Per device, keyed by GPU UUID (as ``energy.per_device_j``), each in watts and MHz:

  ``power_limit_w_before``    the limit set before the run: what the restore puts back
  ``power_limit_w``           the limit set after llem's change (read back)
  ``enforced_power_limit_w``  what the GPU enforced after the change (the lowest limit in force)
  ``enforced_power_limit_w_window_end``, ``sm_clock_mhz_window_end``,
  ``memory_clock_mhz_window_end``  read at the end of the measured window
  ``restored``                what was put back ("power limit 700 W, SM clock unlocked"), or null
                              when the restore failed (``restore_problems`` says why)

A window whose enforced limit or clocks differ from the request is a validity problem
(``validity.checks.gpu_settings``).

A device's settings are a ``GpuDeviceSettings``: a typed dict, not a dataclass, because its keys
arrive in steps (read back after the change, read at the window's end, the restore) and a run
that ends early has only the first steps' keys; a key never set stays absent, as ``restored``
absent (no restore ran) differs from ``restored`` null (the restore failed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict


class GpuDeviceSettings(TypedDict, total=False):
    """One GPU's entry in ``gpu.devices`` (see the module doc), keys in the order written."""

    vendor_index: int | None  # schema 6: nvml_index (migrated)
    power_limit_w_before: float | None
    power_limit_w: float | None
    enforced_power_limit_w: float | None
    sm_clock_mhz: int | None
    memory_clock_mhz: int | None
    enforced_power_limit_w_window_end: float | None
    sm_clock_mhz_window_end: int | None
    memory_clock_mhz_window_end: int | None
    restored: str | None


@dataclass
class GpuSection:
    """The gpu section (see the module doc)."""

    requested_power_limit_w: float | None = None
    requested_sm_clock_mhz: list[int] | None = None  # [min, max]
    requested_memory_clock_mhz: list[int] | None = None  # [min, max]
    devices: dict[str, GpuDeviceSettings] = field(default_factory=dict)  # uuid -> settings
    restored: bool | None = None  # every change put back (null: the run ended before any)
    restore_problems: list[str] = field(default_factory=list)


GPU_LEFT_AS_IT_WAS = "gpu.* null: the run left the GPU's power limit and clocks as they were"

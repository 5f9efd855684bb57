"""The ``gpu:`` section: the GPU's power limit and locked clocks, set through NVML for a run.

Every field null (the default) leaves the GPU as it is. A set field is applied to every GPU the
run measures before the warm-up, read back, recorded in the result (``gpu``) and restored to the
value that was there before when the run ends (``llem.runner.gpu_settings``).

A clock is one value or a locked range, written ``MIN-MAX`` (MHz), which Hydra's command line
takes as it is and sweeps like any value::

    gpu.sm_clock_mhz=1410                 # locked at 1410 MHz (min = max = 1410)
    gpu.sm_clock_mhz=1000-1410            # locked between 1000 and 1410 MHz
    --multirun gpu.sm_clock_mhz=990,1410,1980

The power limit is in watts, as ``nvidia-smi -pl`` takes it. Setting any of them needs root (or
CAP_SYS_ADMIN), as for ``nvidia-smi -pl``; pre-flight says so before anything is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llem.config.knobs import LLEM, knob, show

_CLOCK = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


@dataclass
class GPUConfig:
    power_limit_w: float | None = knob(
        None,
        doc="The GPU's power limit during the run (W, as `nvidia-smi -pl`); null: as it is.",
        goes_to=LLEM,
        gt=0,
    )
    sm_clock_mhz: str | None = knob(
        None,
        doc="Locked SM (graphics) clock, MHz: a value (`1410`) or a range (`1000-1410`); "
        "null: as it is.",
        goes_to=LLEM,
        placeholder="MHZ",
    )
    memory_clock_mhz: str | None = knob(
        None,
        doc="Locked memory clock, MHz: a value (`2619`) or a range (`1593-2619`); null: as it is.",
        goes_to=LLEM,
        placeholder="MHZ",
    )


def parse_clock(value: str | int | None) -> tuple[int, int] | None:
    """``(min, max)`` MHz of a clock knob (``"1410"`` -> (1410, 1410)); None for null.

    Raises ``ValueError`` for anything else, or a range whose minimum exceeds its maximum.
    """
    if value is None:
        return None
    m = _CLOCK.match(str(value))
    if m is None:
        raise ValueError(f"not a clock: {value!r}")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if lo > hi or lo <= 0:
        raise ValueError(f"not a clock range: {value!r}")
    return lo, hi


def is_set(gpu: GPUConfig) -> bool:
    """True when the run changes anything on the GPU."""
    return any(v is not None for v in (gpu.power_limit_w, gpu.sm_clock_mhz, gpu.memory_clock_mhz))


def gpu_problems(gpu: GPUConfig, device: str) -> list[str]:
    """The gpu section's own rules: clocks well formed, and no gpu.* knob on ``device=cpu``."""
    problems = []
    for name in ("sm_clock_mhz", "memory_clock_mhz"):
        value = getattr(gpu, name)
        try:
            parse_clock(value)
        except ValueError:
            problems.append(
                f"gpu.{name}={value} is not a clock (allowed: MHz as a value, e.g. 1410, "
                "or a range MIN-MAX, e.g. 1000-1410)"
            )
    if device == "cpu":
        problems.extend(
            f"gpu.{name}={show(getattr(gpu, name))} needs a GPU but device=cpu "
            "(allowed: device=auto or device=cuda, or gpu.* null)"
            for name in ("power_limit_w", "sm_clock_mhz", "memory_clock_mhz")
            if getattr(gpu, name) is not None
        )
    return problems

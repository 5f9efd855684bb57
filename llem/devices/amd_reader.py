"""One AMD GPU's readings for a window: amdsmi's energy counter, power and the rest of a sample.

The ``GpuReader`` of ``llem.devices.gpu`` for AMD, asked through ``llem.devices.amd.AmdSmi``
(whose ``module`` is amdsmi or a test double; every call holds its lock).

Energy: ``amdsmi_get_energy_count`` returns ``energy_accumulator`` (ticks) and
``counter_resolution`` (uJ per tick); J = ticks x resolution / 1e6. The accumulator is a uint64 in
the API, but the firmware behind it is narrower on some parts (32 bits), so a step backwards is
taken as a wrap at 2**32 when the previous reading was below 2**32, else at 2**64, and only when
the step it implies is under half that width (a real wrap between two reads a sampling period
apart; a glitch backwards implies an impossible step). The counter is read at every sample, so it
cannot wrap twice unseen. A counter that goes backwards without wrapping (ROCm/amdsmi issue 115
reports one), or stays flat for ``FLAT_S`` while the GPU draws ``FLAT_MIN_W`` or more, is dropped:
the GPU's energy is then integrated from its sampled power, with a warning that says so.

Power: ``amdsmi_get_power_info`` in W; ``current_socket_power`` (instantaneous, MI300 and newer)
where the part reports it, else ``average_socket_power`` (a moving average, MI200 and earlier,
Navi); "N/A" is not available.

Throttling: ``amdsmi_get_violation_status`` (MI300 and newer) mapped onto llem's reasons
(``llem.devices.readings.THROTTLE_REASONS``) where the meaning is the same: ``active_ppt_pwr``
(package power tracking: held at the power cap) -> ``sw_power_cap``; ``active_socket_thrm`` and
``active_hbm_thrm`` (GPU or memory at its temperature limit) -> ``sw_thermal_slowdown``;
``active_prochot_thrm`` (the hardware PROCHOT signal) -> ``hw_thermal_slowdown``. The voltage
regulator's thermal limit and the clock-below-host-limit flags have no llem reason and are not read.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Protocol

from llem.devices.gpu import SensorSpec, error_text
from llem.devices.readings import MB, THROTTLE_REASONS, Sample, SecondaryReadings
from llem.vocabulary.processes import OtherProcess

log = logging.getLogger(__name__)

# AMD documents no refresh period and no accuracy for its energy counter or power readings
# (amdsmi API reference, amd-smi docs): these figures are llem's conservative assumptions.
COUNTER_UPDATE_S = 0.1
SENSOR_RELATIVE = 0.10
SENSOR_ABSOLUTE_W = 10.0
AVERAGE_POWER_S = 1.0
SENSOR_SOURCE = (
    "counter step: amdsmi_get_energy_count's counter_resolution; refresh 0.1 s, accuracy "
    "+/- 10 % or 10 W and a 1 s average_socket_power window are llem's assumptions, not AMD's "
    "(AMD documents none)"
)

# a counter flat this long while the GPU draws at least this much is judged stuck
FLAT_S = 2.0  # 20 times the assumed refresh: a slow-refreshing counter is not judged stuck
FLAT_MIN_W = 10.0

_VIOLATIONS = {
    "active_ppt_pwr": "sw_power_cap",
    "active_socket_thrm": "sw_thermal_slowdown",
    "active_hbm_thrm": "sw_thermal_slowdown",
    "active_prochot_thrm": "hw_thermal_slowdown",
}


def na(value: Any) -> Any:
    """None for amdsmi's "N/A" (its stand-in for a value the part does not report); the library
    module (``amd``) reads its answers with it too."""
    return None if value == "N/A" else value


class AmdSmiLike(Protocol):
    """What a reader needs of ``llem.devices.amd.AmdSmi``."""

    module: Any
    lock: Any  # the library's one lock

    def call(self, fn: str, *args: Any) -> Any: ...

    def is_error(self, exc: BaseException) -> bool: ...

    def is_not_supported(self, exc: BaseException) -> bool: ...


def unwrap(previous: int, raw: int) -> int | None:
    """Ticks from ``previous`` to ``raw``; None when the counter went backwards without a
    plausible wrap (see the module docstring)."""
    if raw >= previous:
        return raw - previous
    width = 2**32 if previous < 2**32 else 2**64
    step = raw + width - previous
    return step if step < width // 2 else None


class AmdSmiDevice:
    """One AMD GPU: probes what it supports once, then reads counters and samples."""

    def __init__(self, lib: AmdSmiLike, handle: Any, uuid: str) -> None:
        self._lib, self.handle, self.uuid = lib, handle, uuid
        self._secondary = SecondaryReadings(lib.is_not_supported, lib.is_error, error_text)
        self.warnings: list[str] = []  # taken by the power source once per window
        self.resolution_uj = 1.0
        self._raw: int | None = None
        self._ticks = 0
        self._flat_since: float | None = None
        self.has_counter = self._probe_counter()
        self.power_key = self._pick_power_key()
        self.power_api: str | None = {
            "current_socket_power": "instant",
            "average_socket_power": "average",
        }.get(self.power_key or "")
        self._temp_type = self._pick_temperature()

    # ------------------------------------------------------------------ probing
    def _try(self, fn: Callable[[], Any]) -> Any:
        """``fn()``; None when amdsmi says the part cannot (or fails now)."""
        try:
            return fn()
        except Exception as exc:
            if self._lib.is_error(exc) or isinstance(exc, AttributeError):
                return None
            raise

    def _probe_counter(self) -> bool:
        got = self._try(lambda: self._lib.call("amdsmi_get_energy_count", self.handle))
        if got is None or na(got.get("energy_accumulator")) is None:
            return False
        resolution = na(got.get("counter_resolution"))
        if not resolution or resolution <= 0:
            return False
        self.resolution_uj = float(resolution)
        self._raw = int(got["energy_accumulator"])
        return True

    def _pick_power_key(self) -> str | None:
        info = self._try(lambda: self._lib.call("amdsmi_get_power_info", self.handle))
        for key in ("current_socket_power", "average_socket_power"):
            if info is not None and na(info.get(key)) is not None:
                return key
        return None

    def _pick_temperature(self) -> Any:
        kinds = self._lib.module.AmdSmiTemperatureType
        for kind in (kinds.HOTSPOT, kinds.EDGE):
            if self._try(functools.partial(self._temperature_of, kind)) is not None:
                return kind
        return None

    def sensor(self) -> SensorSpec:
        """The counter's own step; llem's assumed refresh and accuracy (AMD documents none)."""
        average = self.power_api == "average"
        return SensorSpec(
            self.resolution_uj / 1e6,
            COUNTER_UPDATE_S,
            SENSOR_RELATIVE,
            SENSOR_ABSOLUTE_W,
            AVERAGE_POWER_S if average else 0.0,
            SENSOR_SOURCE,
            "amdsmi average_socket_power" if average else "amdsmi current_socket_power",
        )

    # ------------------------------------------------------------------ energy
    def _advance(self) -> None:
        """Read the accumulator and add its step to the running total (lock held)."""
        got = self._lib.call("amdsmi_get_energy_count", self.handle)
        raw = int(got["energy_accumulator"])
        previous = self._raw if self._raw is not None else raw
        step = unwrap(previous, raw)
        self._raw = raw
        if step is None:
            self._drop_counter(
                f"its energy counter went backwards ({previous} -> {raw} ticks) without wrapping"
            )
            return
        self._ticks += step

    def _drop_counter(self, why: str) -> None:
        if not self.has_counter:
            return
        self.has_counter = False
        text = (
            f"{self.uuid}: {why}; its energy is integrated from sampled power "
            f"(amdsmi {self.power_key or 'power'}) from now on"
        )
        log.warning("%s", text)
        self.warnings.append(text)

    def read_counter_j(self) -> float:
        """The energy counter in J since this reader began (wrap-around undone). Raises
        amdsmi's error. After the counter is dropped, the last good total."""
        with self._lib.lock:
            if self.has_counter:
                self._advance()
            return self._ticks * self.resolution_uj / 1e6

    def _watch_flat(self, now: float, power: float | None) -> None:
        """Drop the counter when it has not moved for ``FLAT_S`` while power was drawn."""
        if not self.has_counter:
            return
        try:
            with self._lib.lock:
                before = self._ticks
                self._advance()
                moved = self._ticks != before
        except Exception as exc:
            if not self._lib.is_error(exc):
                raise
            log.debug("%s: energy counter read failed: %s", self.uuid, error_text(exc))
            return  # the window's edge reads decide whether the counter works
        if moved or power is None or power < FLAT_MIN_W:
            self._flat_since = None
            return
        if self._flat_since is None:
            self._flat_since = now
        elif now - self._flat_since >= FLAT_S:
            self._drop_counter(
                f"its energy counter stayed flat for {now - self._flat_since:g} s while the GPU "
                f"drew {power:g} W"
            )

    def read_power_w(self) -> float | None:
        if self.power_key is None:
            return None
        value = na(self._lib.call("amdsmi_get_power_info", self.handle)[self.power_key])
        return None if value is None else float(value)

    # ------------------------------------------------------------------ a sample
    def read_sample(self, now: float) -> Sample:
        """Everything the sampler records. Raises amdsmi's error only when the primary reading
        fails (power on a GPU whose energy is integrated from it)."""
        call, h = self._lib.call, self.handle
        errors: list[tuple[str, str]] = []

        def read(key: str, fn: Callable[[], Any], *columns: str) -> Any:
            return self._secondary.read(key, fn, errors, *columns)

        if not self.has_counter:
            power = self.read_power_w()
        else:
            power = read("power", self.read_power_w, "power_w")
            self._watch_flat(now, power)
        vram = read("memory", lambda: call("amdsmi_get_gpu_vram_usage", h), "memory_used_mb")
        act = read("util", lambda: call("amdsmi_get_gpu_activity", h), "gpu_util_pct")
        return Sample(
            time_s=now,
            device=self.uuid,
            power_w=power,
            temperature_c=read("temp", self._temperature, "temperature_c"),
            sm_clock_mhz=read("sm_clock", lambda: self._clock("GFX"), "sm_clock_mhz"),
            mem_clock_mhz=read("mem_clock", lambda: self._clock("MEM"), "mem_clock_mhz"),
            throttle_reasons=read("throttle", self._throttle_reasons, "throttle_reasons"),
            memory_used_mb=None if vram is None else _num(vram.get("vram_used")),
            gpu_util_pct=None if act is None else _num(act.get("gfx_activity")),
            mem_util_pct=None if act is None else _num(act.get("umc_activity")),
            errors=tuple(errors),
        )

    def _clock(self, kind: str) -> float | None:
        clk_type = getattr(self._lib.module.AmdSmiClkType, kind)
        return _num(self._lib.call("amdsmi_get_clock_info", self.handle, clk_type)["clk"])

    def _throttle_reasons(self) -> tuple[str, ...]:
        status = self._lib.call("amdsmi_get_violation_status", self.handle)
        held = {name for key, name in _VIOLATIONS.items() if na(status.get(key)) is True}
        return tuple(r for r in THROTTLE_REASONS if r in held)

    def _temperature_of(self, kind: Any) -> float | None:
        current = self._lib.module.AmdSmiTemperatureMetric.CURRENT
        return _num(self._lib.call("amdsmi_get_temp_metric", self.handle, kind, current))

    def _temperature(self) -> float | None:
        return None if self._temp_type is None else self._temperature_of(self._temp_type)

    def read_temperature_c(self) -> float | None:
        temp: float | None = self._secondary.read("temp", self._temperature, [], "temperature_c")
        return temp

    def other_processes(self, is_own: Callable[[int], bool]) -> list[OtherProcess] | None:
        """Processes on this GPU for which ``is_own(pid)`` is false; None when amdsmi cannot
        list them."""
        try:
            procs = self._lib.call("amdsmi_get_gpu_process_list", self.handle)
        except Exception as exc:
            if self._lib.is_error(exc) or isinstance(exc, AttributeError):
                log.warning("%s: cannot list GPU processes: %s", self.uuid, error_text(exc))
                return None
            raise
        others = [p for p in procs if not is_own(int(p["pid"]))]
        return [OtherProcess(self.uuid, int(p["pid"]), _vram_mb(p)) for p in others]


def _num(value: Any) -> float | None:
    value = na(value)
    return None if value is None else float(value)


def _vram_mb(process: dict[str, Any]) -> float | None:
    """A process's VRAM in MB (amdsmi reports bytes under memory_usage.vram_mem)."""
    used = na((process.get("memory_usage") or {}).get("vram_mem"))
    return None if used is None else float(used) / MB

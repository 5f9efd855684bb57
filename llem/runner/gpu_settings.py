"""The ``gpu`` section applied to a run: checked in pre-flight, set, read back, checked at the end
of the window, and put back on every way out.

``gpu_preflight_problems(exp)`` checks, without changing anything, every GPU the run would touch:
NVML reachable, each value inside what NVML allows (the power limit's range, the supported clocks),
and the right to change it (``GpuControl.permission_problem``: the power limit set to itself).

``GpuSettings`` is the run's side: ``apply()`` (before the idle baseline and the warm-up, so both
and the window run under the settings) first writes the crash record
(``llem.measure.gpu_record``), then installs a SIGTERM handler (restore, then the previous handler;
with none, exit 143 = 128 + 15), then sets. ``check_window_end()`` reads the enforced limit and
the clocks right after the window: a difference from the request is a validity problem.
``restore()`` (from the run's ``finally``: a normal end, an exception, Ctrl-C) puts back what was
there and removes the record; a failed restore is logged as an error and keeps the record for
``python -m llem.gpu restore``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import asdict
from types import FrameType
from typing import Any

from llem.config.gpu import GPUConfig, is_set, parse_clock
from llem.devices.gpu import Gpu, GpuLibrary, GpuOpener, GpuUnavailable
from llem.devices.gpu_control import (
    GpuControl,
    GpuControlError,
    GpuState,
    clock_problem,
    power_problem,
)
from llem.devices.gpus import open_gpus
from llem.errors import EXIT_SIGTERM, LlemError
from llem.measure.devices import DeviceMappingError, resolve_devices, torch_device_uuids
from llem.measure.gpu_record import Restore, own_record_path, restore_gpu, write_record
from llem.result import Figure, RunResult
from llem.result.gpu import GPU_LEFT_AS_IT_WAS, GpuDeviceSettings, GpuSection

log = logging.getLogger("llem.gpu")

_POWER_TOLERANCE_W = 1.0  # NVML rounds limits to whole watts on some GPUs


class GpuSettingsError(LlemError):
    """NVML refused a change the pre-flight allowed (another process changed the GPU between)."""


def requested_settings(cfg: GPUConfig) -> str:
    """The requested ``gpu.*`` settings in one line ("" when the GPU is left as it was)."""
    return " ".join(f"gpu.{k}={v}" for k, v in asdict(cfg).items() if v is not None)


def _targets(lib: GpuLibrary, torch_indices: Sequence[int] | None) -> list[Gpu]:
    """The physical GPUs the run uses (every visible one when ``torch_indices`` is None)."""
    found, _ = resolve_devices(lib, torch_indices, os.environ, torch_device_uuids(torch_indices))
    return [gpu for _, gpu in found]


# ------------------------------------------------------------------------------ pre-flight
def gpu_preflight_problems(
    cfg: GPUConfig, torch_indices: Sequence[int] | None, opener: GpuOpener = open_gpus
) -> list[str]:
    """Every reason the gpu section cannot be applied (empty when it can, or is all null)."""
    if not is_set(cfg):
        return []
    try:
        lib = opener()
    except GpuUnavailable as exc:
        return [f"{requested_settings(cfg)} needs a GPU that NVML or amdsmi can reach ({exc})"]
    try:
        gpus = _targets(lib, torch_indices)
        if not gpus:
            return [
                f"{requested_settings(cfg)} needs a GPU, and {lib.api} sees none visible to "
                "this run"
            ]
        control = GpuControl(lib)
        return [p for gpu in gpus for p in _gpu_problems(control, gpu, cfg)]
    except DeviceMappingError as exc:
        return [f"{requested_settings(cfg)}: {exc}"]
    finally:
        lib.shutdown()


def _gpu_problems(control: GpuControl, gpu: Gpu, cfg: GPUConfig) -> list[str]:
    problems = []
    if cfg.power_limit_w is not None:
        found = power_problem(control.state(gpu), cfg.power_limit_w)
        problems += [found] if found else []
    for key, value, read in (
        ("gpu.sm_clock_mhz", cfg.sm_clock_mhz, control.supported_sm_clocks),
        ("gpu.memory_clock_mhz", cfg.memory_clock_mhz, control.supported_memory_clocks),
    ):
        wanted = parse_clock(value)
        if wanted is None:
            continue
        try:
            found = clock_problem(key, gpu.index, wanted, read(gpu))
        except GpuControlError as exc:
            found = f"{key}={value} cannot be checked on GPU {gpu.index} ({exc})"
        problems += [found] if found else []
    permission = control.permission_problem(gpu)
    return problems + ([permission] if permission else [])


# ------------------------------------------------------------------------------ the run
class GpuSettings:
    """The gpu section on one run's GPUs: ``apply``, ``check_window_end``, ``restore``."""

    def __init__(
        self, cfg: GPUConfig, torch_indices: Sequence[int] | None, opener: GpuOpener = open_gpus
    ) -> None:
        self.cfg = cfg
        self.torch_indices = torch_indices
        self._open = opener
        self.active = is_set(cfg)
        self._lib: GpuLibrary | None = None
        self._gpus: list[Gpu] = []
        self._entries: list[Restore] = []
        self._previous_handler: Any = None
        self._handler_installed = False
        self.section = GpuSection(
            requested_power_limit_w=cfg.power_limit_w,
            requested_sm_clock_mhz=_as_list(parse_clock(cfg.sm_clock_mhz)),
            requested_memory_clock_mhz=_as_list(parse_clock(cfg.memory_clock_mhz)),
        )

    # -------------------------------------------------------------- apply
    def apply(self) -> None:
        """Record, then set every requested value on every GPU of the run, then read back."""
        if not self.active:
            return
        try:
            self._lib = self._open()
        except GpuUnavailable as exc:
            raise GpuSettingsError(
                f"{requested_settings(self.cfg)}: no GPU library (NVML, amdsmi) can start ({exc})"
            ) from exc
        control = GpuControl(self._lib)
        self._gpus = _targets(self._lib, self.torch_indices)
        before = {g.uuid: control.state(g) for g in self._gpus}
        self._entries = [self._entry(g, before[g.uuid]) for g in self._gpus]
        write_record(self._entries)  # before any change: a crash after it is restorable
        self._install_sigterm()
        for gpu in self._gpus:
            self._set(control, gpu)
            self.section.devices[gpu.uuid] = _read_back(control.state(gpu), before[gpu.uuid])
        log.info("GPU settings applied: %s", requested_settings(self.cfg))

    def _entry(self, gpu: Gpu, state: GpuState) -> Restore:
        return Restore(
            uuid=gpu.uuid,
            index=gpu.index,
            power_limit_w=state.power_limit_w if self.cfg.power_limit_w is not None else None,
            sm_clocks_locked=self.cfg.sm_clock_mhz is not None,
            memory_clocks_locked=self.cfg.memory_clock_mhz is not None,
        )

    def _set(self, control: GpuControl, gpu: Gpu) -> None:
        sm = parse_clock(self.cfg.sm_clock_mhz)
        mem = parse_clock(self.cfg.memory_clock_mhz)
        try:
            if self.cfg.power_limit_w is not None:
                control.set_power_limit(gpu, self.cfg.power_limit_w)
            if mem is not None:
                control.lock_memory_clocks(gpu, *mem)
            if sm is not None:
                control.lock_sm_clocks(gpu, *sm)
        except GpuControlError as exc:
            raise GpuSettingsError(str(exc)) from exc

    # -------------------------------------------------------------- the window's end
    def check_window_end(self, result: RunResult) -> None:
        """Read the enforced limit and clocks now (the window just ended) and judge them."""
        if not self.active or self._lib is None:
            return
        control = GpuControl(self._lib)
        problems = []
        for gpu in self._gpus:
            state = control.state(gpu)
            device = self.section.devices.setdefault(gpu.uuid, {})
            device["enforced_power_limit_w_window_end"] = state.enforced_power_limit_w
            device["sm_clock_mhz_window_end"] = state.sm_clock_mhz
            device["memory_clock_mhz_window_end"] = state.memory_clock_mhz
            problems += _differences(self.section, state)
        _judge(result, problems)

    # -------------------------------------------------------------- restore
    def restore(self) -> None:
        """Put back what was there (idempotent); remove the record when everything went back."""
        if not self._entries or self._lib is None:
            return
        entries, self._entries = self._entries, []
        control = GpuControl(self._lib)
        by_uuid = {g.uuid: g for g in self._gpus}
        failures = []
        for entry in entries:
            failed = restore_gpu(control, by_uuid[entry.uuid], entry)
            done = entry.describe().split(": ", 1)[1]
            self.section.devices.setdefault(entry.uuid, {})["restored"] = None if failed else done
            failures += failed
        self.section.restored = not failures
        self.section.restore_problems = failures
        self._uninstall_sigterm()
        self._lib.shutdown()
        if failures:
            log.error(
                "GPU SETTINGS NOT RESTORED: %s; the record %s stays: run `python -m llem.gpu "
                "restore` (as root) to put them back",
                "; ".join(failures),
                own_record_path(),
            )
            return
        own_record_path().unlink(missing_ok=True)
        log.info("GPU settings restored: %s", "; ".join(e.describe() for e in entries))

    def fill(self, result: RunResult) -> None:
        if self.active:
            result.gpu = self.section
        else:
            result.null_reasons.setdefault("gpu", GPU_LEFT_AS_IT_WAS)

    # -------------------------------------------------------------- SIGTERM
    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers live in the main thread; the run's finally still restores
        self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._handler_installed = True

    def _uninstall_sigterm(self) -> None:
        if self._handler_installed:
            signal.signal(signal.SIGTERM, self._previous_handler)
            self._handler_installed = False

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        log.warning("SIGTERM: restoring the GPU settings before exiting")
        previous = self._previous_handler
        self.restore()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            raise SystemExit(EXIT_SIGTERM)


def _as_list(pair: tuple[int, int] | None) -> list[int] | None:
    return None if pair is None else list(pair)


def _read_back(state: GpuState, before: GpuState) -> GpuDeviceSettings:
    return {
        "vendor_index": state.index,
        "power_limit_w_before": before.power_limit_w,
        "power_limit_w": state.power_limit_w,
        "enforced_power_limit_w": state.enforced_power_limit_w,
        "sm_clock_mhz": state.sm_clock_mhz,
        "memory_clock_mhz": state.memory_clock_mhz,
    }


def _differences(section: GpuSection, state: GpuState) -> list[str]:
    """One sentence per setting that the GPU did not hold at the window's end."""
    out = []
    want_w = section.requested_power_limit_w
    got_w = state.enforced_power_limit_w
    if want_w is not None and (got_w is None or abs(got_w - want_w) > _POWER_TOLERANCE_W):
        out.append(
            f"GPU {state.index} enforced a power limit of {got_w} W at the window's end, "
            f"not the gpu.power_limit_w={want_w:g} asked for"
        )
    for key, want, got in (
        ("sm_clock_mhz", section.requested_sm_clock_mhz, state.sm_clock_mhz),
        ("memory_clock_mhz", section.requested_memory_clock_mhz, state.memory_clock_mhz),
    ):
        if want is not None and (got is None or not want[0] <= got <= want[1]):
            out.append(
                f"GPU {state.index} ran at {got} MHz at the window's end, outside the "
                f"gpu.{key}={want[0]}-{want[1]} asked for"
            )
    return out


def _judge(result: RunResult, problems: list[str]) -> None:
    validity = result.validity
    validity.checks["gpu_settings"] = "failed" if problems else "passed"
    validity.problems.extend(problems)
    if problems and validity.energy_valid is not None:
        result.set_figure("validity.energy_valid", Figure(False))

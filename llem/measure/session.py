"""``MeasurementSession``: the one object a run uses to measure energy, power, heat and memory.

    session = MeasurementSession(
        cfg.measurement, torch_device_indices=[0], device_type="cuda", idle_cache=cache
    )                                     # cache: the caller's IdleCache, one per process
    problems = session.preflight()        # before loading anything
    session.start()                       # after CUDA is initialised, before the model loads
    session.cooldown()
    with session.window() as w:           # the measured generation
        ...
    m = session.measurement(output_tokens=n, requests=r, input_tokens=k)   # -> Measurement
    session.write_timeseries(run_dir / "timeseries.csv")
    session.close()

Devices: ``measurement.gpu_indices`` if set, else ``torch_device_indices``, else every device torch
can see. They are torch indices, i.e. relative to ``CUDA_VISIBLE_DEVICES``; see
``llem.measure.devices`` for how they are matched to NVML devices (by UUID).

The idle baseline is measured once per set of devices and kept in the session's ``IdleCache``; a
caller that runs several sessions in one process passes them the same cache, so the baseline is
measured once per process (see ``llem.measure.idle``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from llem.cache import llem_cache_dir
from llem.config.schema import MeasurementConfig
from llem.devices.cpu_energy import RaplReader
from llem.devices.gpu import GpuOpener, on_gpu
from llem.devices.gpus import open_gpus
from llem.devices.powercap import DEFAULT_POWERCAP_ROOT
from llem.measure.chassis import ChassisMeter, ChassisWindow, WallReader
from llem.measure.cooling import Cooling, wait_until_cool
from llem.measure.devices import DeviceInfo
from llem.measure.energy_section import Counts
from llem.measure.gpu_source import GpuSource
from llem.measure.idle import IdleBaseline, IdleCache
from llem.measure.idle_settling import IdleSettling
from llem.measure.idle_store import IdleStore, hot_text
from llem.measure.measurement import Measurement, build_measurement
from llem.measure.meter import EnergyMeter, WindowResult
from llem.measure.node_check import check_node
from llem.measure.power_source import PowerSource, SourceError
from llem.measure.rapl_reader import open_rapl
from llem.measure.sampler import Clock, RealClock
from llem.measure.sources import (
    DISABLED,
    OpenedSource,
    energy_mode,
    open_source,
    source_problems,
)
from llem.measure.timeseries import write_timeseries
from llem.measure.window import MeasurementWindow
from llem.vocabulary.model import WorkloadProcesses

log = logging.getLogger(__name__)


class MeasurementSession(IdleSettling):
    """Measures one run's energy window. See the module docstring for the call order.

    ``idle_cache`` holds idle baselines across sessions: pass the same one to every session of a
    process (None: a cache of this session's own, so its baseline is measured afresh).
    ``idle_store`` keeps them across processes (None: ``idle_baselines.json`` in llem's cache
    directory, unless ``measurement.idle_cache_max_age_s`` is 0).
    ``rapl`` reads the host's CPU packages and DRAM (None: ``open_rapl(powercap_root)`` at
    ``start()``). ``clock``, ``powercap_root``, ``rapl``, ``cuda_sync`` and ``env`` are for tests.
    ``wall`` reads the chassis's power at the wall (``llem.devices.bmc``), every
    ``wall_interval_s`` inside each measured window (None: the chassis is not measured).
    ``energy_refused`` says why this host's devices are not the run's to measure (a running
    server on another host, or on GPUs not named): nothing is opened, the energy is null with it.
    """

    def __init__(
        self,
        cfg: MeasurementConfig,
        torch_device_indices: Sequence[int] | None = None,
        device_type: str = "cuda",
        *,
        clock: Clock | None = None,
        powercap_root: str | Path = DEFAULT_POWERCAP_ROOT,
        rapl: RaplReader | None = None,
        cuda_sync: Callable[[], None] | None = None,
        env: Mapping[str, str] | None = None,
        idle_cache: IdleCache | None = None,
        idle_store: IdleStore | None = None,
        gpu_settings: str = "",
        gpus: GpuOpener = open_gpus,
        energy_refused: str | None = None,
        wall: WallReader | None = None,
        wall_interval_s: float = 1.0,
    ) -> None:
        self.cfg = cfg
        self._wall, self._wall_interval_s = wall, wall_interval_s  # the chassis (docstring)
        # why this machine's devices are not the run's to measure (a running server elsewhere,
        # or on GPUs not named): nothing is opened, and the energy is null with this reason
        self._refused = energy_refused
        self._workload: WorkloadProcesses | None = None
        self.device_type = device_type
        gpu = cfg.gpu_indices
        self.torch_indices = (
            list(gpu)
            if gpu is not None
            else (list(torch_device_indices) if torch_device_indices is not None else None)
        )
        self.clock: Clock = clock or RealClock()
        self._powercap_root = powercap_root
        self._cuda_sync = cuda_sync
        self._env = env
        self._gpus = gpus  # opens the GPUs' vendor library (a test hands its double's)
        self._idle_cache = idle_cache if idle_cache is not None else IdleCache()
        # idle baselines are kept per GPU settings (gpu.*: "" when the GPU is left as it was)
        self._gpu_settings = gpu_settings
        if idle_store is None and (cfg.idle_cache_max_age_s or 0) > 0:
            idle_store = IdleStore(llem_cache_dir(), settings=gpu_settings)
        self._idle_store = idle_store
        self.origin_s: float | None = None
        self.devices: list[DeviceInfo] = []
        self.source: PowerSource | None = None
        self.unavailable_reason: str | None = None
        self.no_gpu_reason: str | None = None
        self.gpus_absent: str | None = None  # a run on no GPU, on a host where none is visible
        self.setup_warnings: list[str] = []
        self.preflight_warnings: list[str] = []  # filled by preflight()
        self.idle = IdleBaseline(None, null_reason="session not started")
        self.last_window: WindowResult | None = None
        self._rapl: RaplReader | None = rapl
        # set by start(): a window measures energy (a GPU's, or a CPU run's RAPL counters that
        # read); only such a window is stretched to min_window_s
        self.measures_energy = False
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    def preflight(self) -> list[str]:
        """Cheap checks before any model load; one sentence per problem naming the key and value.

        ``energy=auto`` without NVML is not a problem (energy is then unavailable, with a reason);
        ``boundary=node`` of which no part can be read is, and one of which only part can be read
        leaves a warning in ``preflight_warnings`` (``llem.measure.node_check``).
        """
        env = self._environ()
        problems = source_problems(self.cfg, self.device_type, self.torch_indices, env, self._gpus)
        node = check_node(
            self.cfg, self.device_type, env, self._gpus, self._rapl_reader, self._refused
        )
        self.preflight_warnings = node.warnings
        return problems + node.problems

    def _rapl_reader(self) -> RaplReader:
        """The reader the run uses: the one handed in, else this host's powercap's."""
        return self._rapl if self._rapl is not None else open_rapl(self._powercap_root, self.clock)

    def _environ(self) -> Mapping[str, str]:
        return self._env if self._env is not None else os.environ

    def start(self) -> None:
        """Open the power source, map devices, and settle the idle baseline: measured for
        ``idle_baseline_s`` the first time this process measures these devices, reused after
        that (see ``llem.measure.idle``).

        Call after CUDA is initialised and before the model loads. The replay trace's time 0 is
        now. Raises ``PreflightError`` when ``energy=nvml``/``replay`` was asked for and cannot be
        had; with ``energy=auto`` energy just becomes unavailable, with the reason.
        """
        if self._started:
            raise RuntimeError("MeasurementSession.start() called twice")
        self._started = True
        self.origin_s = self.clock.now()
        opened = (
            OpenedSource(unavailable_reason=self._refused, no_gpu_reason=self._refused)
            if self._refused is not None
            else open_source(
                self.cfg,
                self.device_type,
                self.torch_indices,
                self._environ(),
                self.origin_s,
                self._gpus,
            )
        )
        self.source, self.devices = opened.source, opened.devices
        self.unavailable_reason = opened.unavailable_reason
        self.no_gpu_reason, self.gpus_absent = opened.no_gpu_reason, opened.gpus_absent
        self.setup_warnings += opened.warnings
        if energy_mode(self.cfg) != "none" and self._refused is None:
            self._rapl = self._rapl_reader()
            # without a GPU source, RAPL is the run's energy if its counters read (one read)
            self.measures_energy = self.source is not None or self._rapl.package_reads()
        for w in self.setup_warnings:
            log.warning("%s", w)
        self.idle = self._idle_baseline()

    @property
    def memory_bandwidth_bytes_per_s(self) -> float | None:
        """Peak memory bandwidth (bytes/s) summed over the measured GPUs, after ``start()``; None
        when a GPU's is unknown or nothing is measured (see ``devices`` for each GPU's figure)."""
        bws = [d.memory_bandwidth_bytes_per_s for d in self.devices]
        known = [b for b in bws if b is not None]
        return sum(known) if known and len(known) == len(bws) else None

    # ------------------------------------------------------------------ run
    def cooldown(self) -> dict[str, float | None]:
        """Wait ``cooldown_s``; with ``cooldown_temp_margin_c`` set, wait until every device is at
        most that many degrees C above its idle temperature, ``cooldown_s`` at most (polled every
        0.5 s; a warning joins the report when the bound is hit). Without idle temperatures (no
        idle baseline, no NVML) it just waits ``cooldown_s``.

        Returns ``{"cooldown_waited_s": seconds, "start_temp_c": hottest device now or None}``.
        """
        limit = float(self.cfg.cooldown_s or 0.0)
        margin = self.cfg.cooldown_temp_margin_c
        if margin is not None and self.idle.temperature_c:
            cooling = self._wait_until_cool(self.idle.temperature_c, margin)
            if cooling.still_hot:
                self.setup_warnings.append(
                    f"cooldown stopped at measurement.cooldown_s={limit} s with "
                    + hot_text(cooling.still_hot, self.idle.temperature_c)
                    + f", above idle + measurement.cooldown_temp_margin_c={margin}"
                )
            waited, temps = cooling.waited_s, cooling.temperatures_c
        else:
            t0 = self.clock.now()
            self.clock.sleep(limit)
            waited, temps = self.clock.now() - t0, self._temperatures()
        known = [t for t in temps.values() if t is not None]
        return {"cooldown_waited_s": waited, "start_temp_c": max(known) if known else None}

    def _wait_until_cool(self, idle_c: Mapping[str, float], margin_c: float) -> Cooling:
        """Poll temperatures until the devices are back near ``idle_c``, ``cooldown_s`` at most."""
        limit_s = float(self.cfg.cooldown_s or 0.0)
        return wait_until_cool(self._temperatures, self.clock, limit_s, idle_c, margin_c)

    def _temperatures(self) -> dict[str, float | None]:
        if self.source is None:
            return {}
        try:
            return self.source.read_temperatures_c(self.clock.now())
        except SourceError as exc:
            log.warning("cannot read temperatures: %s", exc)
            return {}

    def window(self) -> MeasurementWindow:
        """The measured window (a context manager). The GPU is synchronised at both edges when
        the run is on one; the sampler runs at ``sample_hz`` inside it and is stopped and
        joined on the way out, exceptions included. A later window replaces an earlier one."""
        if not self._started:
            raise RuntimeError("MeasurementSession.window() before start()")
        return self._window(sync=self.cuda_sync if on_gpu(self.device_type) else None, keep=True)

    def _window(self, sync: Callable[[], None] | None, keep: bool) -> MeasurementWindow:
        return MeasurementWindow(
            EnergyMeter(self.source, self._rapl, self.clock),
            self.clock,
            float(self.cfg.sample_hz),
            self.origin_s or 0.0,
            sync=sync,
            on_end=self._keep_window if keep else None,
            chassis=(
                ChassisMeter(self._wall, self.clock, self._wall_interval_s)
                if keep and self._wall is not None
                else None
            ),
        )

    def count_as_own(self, workload: WorkloadProcesses | None) -> None:
        """Processes outside llem's tree that are the run's own (a running server's): not other
        processes in the windows after this call. Call after ``start()``."""
        self._workload = workload
        if isinstance(self.source, GpuSource):
            self.source.workload = workload

    def _keep_window(self, result: WindowResult) -> None:
        self.last_window = result

    def cuda_sync(self) -> None:
        if self._cuda_sync is not None:
            self._cuda_sync()
            return
        import torch

        if torch.cuda.is_available():
            for i in (
                self.torch_indices
                if self.torch_indices is not None
                else range(torch.cuda.device_count())
            ):
                torch.cuda.synchronize(i)

    # ------------------------------------------------------------------ results
    def measurement(self, output_tokens: int, requests: int, input_tokens: int = 0) -> Measurement:
        """The last window as result sections: energy with uncertainty bounds, thermal, hardware
        and the validity verdict; ``output_tokens``/``input_tokens``/``requests`` made in it."""
        if self.last_window is None:
            raise RuntimeError("MeasurementSession.measurement() before a window() finished")
        return build_measurement(
            self.last_window,
            cfg=self.cfg,
            device_type=self.device_type,
            unavailable_reason=self.unavailable_reason,
            no_gpu_reason=self.no_gpu_reason,
            gpus_absent=self.gpus_absent,
            idle=self.idle,
            devices=self.devices,
            setup_warnings=self.setup_warnings,
            counts=Counts(output_tokens, input_tokens, requests),
            cpu_disabled_reason=self._refused or self._cpu_disabled(),
            workload_said=None if self._workload is None else self._workload.said,
        )

    def last_chassis(self) -> ChassisWindow | None:
        """The chassis's energy over the last window (None: the chassis was not read)."""
        return None if self.last_window is None else self.last_window.chassis

    def last_window_start_utc(self) -> datetime | None:
        """The wall-clock instant the last window started (None: no window yet)."""
        return None if self.last_window is None else self.last_window.started_utc

    def _cpu_disabled(self) -> str | None:
        return DISABLED if energy_mode(self.cfg) == "none" else None

    def write_timeseries(self, path: str | Path) -> int:
        """Write the last window's samples as CSV (one row per sample per device; ``time_s`` from
        the window start; empty cell = not readable). Returns the number of rows."""
        if self.last_window is None:
            raise RuntimeError("MeasurementSession.write_timeseries() before a window() finished")
        return write_timeseries(self.last_window, path)

    def close(self) -> None:
        """Release the GPUs' library (NVML's ``nvmlShutdown``). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.source is not None:
            self.source.close()

    def __enter__(self) -> MeasurementSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""One run: validate, pre-flight, snapshot, load (or reuse), warm up, measure, write, clean up.

A ``Runner`` holds what outlives one run inside a process: the loaded model kept for the next run
(``reuse_model``) and the idle-power baseline. The Hydra entrypoint holds one, and so do tests.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from llem.backends import create_backend, run_seed
from llem.backends.memory import peak_memory, reset_peak_memory
from llem.backends.stops import prompt_stops
from llem.config.schema import ExperimentConfig
from llem.devices.gpu import on_gpu
from llem.devices.gpus import RunGpus
from llem.measure import MeasurementSession
from llem.measure.engine_gpus import judge_engine_gpus
from llem.measure.gpu_record import restore_leftovers
from llem.measure.idle import IdleCache
from llem.measure.timeseries import TIMESERIES_FILE
from llem.quality.task import Task
from llem.result import ErrorInfo, RunResult, SweepPosition, utc_now, write_generations
from llem.runner.assemble import (
    fill_compilations,
    fill_compute,
    fill_measurement,
    fill_memory,
    fill_prefix_cache,
    fill_workload,
    label_eager_fallback,
    new_result,
    no_temperature_reason,
)
from llem.runner.chat_template import prepare_prompts
from llem.runner.draft_energy import fill_draft_energy
from llem.runner.engine_facts import write_engine_facts, write_window_facts
from llem.runner.engine_processes import measured_here
from llem.runner.environment import EnvironmentCache, write_environment
from llem.runner.footprint import fill_footprint, wall_reader
from llem.runner.gpu_settings import GpuSettings, requested_settings
from llem.runner.kept_model import KeptModel
from llem.runner.preflight import metered_device, preflight
from llem.runner.prepare import Prepared, prepare
from llem.runner.progress import BatchProgress
from llem.runner.quality import fill_quality
from llem.runner.serving import (
    Served,
    ServePlan,
    as_batch,
    fill_serving,
    offline_requests,
    plan,
    serve_once,
)
from llem.runner.tasks import load_task
from llem.runner.threads import settle_threads
from llem.runner.torch_devices import init_gpu_context, measured_indices, model_gpu_indices, no_sync
from llem.runner.weights import fill_weights
from llem.vocabulary.engine import Backend
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import BatchOutput, ServeOutput

if TYPE_CHECKING:
    from llem.vocabulary.workload import Prompt

log = logging.getLogger("llem.run")

MAX_PASSES = 10_000
UNKNOWN_BATCH = "the engine's maximum batch is unknown: its concurrency knob is not set"


@dataclass
class _Measured:
    outputs: list[BatchOutput]
    passes: int
    n_prompts: int
    served: ServeOutput | None = None  # the workload, when the run served one (Backend.serve)
    task: Task | None = None  # the scored prompts' task (None: nothing is scored)


class Runner:
    """What outlives one run inside a process: the loaded model kept for reuse, the idle
    baselines, and the environment snapshot (the same for every run of the process but for its
    time and ``CUDA_VISIBLE_DEVICES``, so it is captured once)."""

    live_display: bool  # a sweep's live display owns the terminal: batch progress goes to the log
    idle_cache: IdleCache  # idle-power baselines this runner's runs measured, for later runs

    # the Hydra job's ``hydra`` node as plain data, set by the command that runs under Hydra (how
    # many points its launcher runs at once); None: one run in this process
    hydra: dict[str, Any] | None = None

    def __init__(self, live_display: bool = False) -> None:
        self.live_display = live_display
        self.idle_cache = IdleCache()
        self._model = KeptModel()  # the model kept for the next run (reuse_model)
        self._environment: EnvironmentCache = EnvironmentCache()
        self._gpus = RunGpus()  # the GPU library of the run under way (closed at its end)
        restore_leftovers()  # GPU settings a killed llem left behind (llem.measure.gpu_record)

    def run(
        self,
        cfg: DictConfig | ExperimentConfig | Prepared,
        run_dir: Path,
        overrides: list[str] | None = None,
        reuse_model: bool = False,
        sweep: SweepPosition | None = None,
    ) -> RunResult:
        """Run one configuration and write ``run_dir/result.json``; return the result.

        Configuration errors raise ``ConfigError`` and pre-flight failures ``PreflightError``
        before anything is written. Once the run has started, any failure is recorded in
        result.json (``status: failed``) and re-raised. A dry run writes nothing and returns a
        result whose status is ``dry_run``. With ``reuse_model`` the model stays loaded for the
        next run whose load key matches (``close`` frees it).
        """
        started_at, t_start = utc_now(), time.perf_counter()
        prepared = prepare(cfg)
        exp = prepared.exp
        with self._gpus:  # the run's GPU library: opened at the first ask, closed on every way out
            checks = preflight(exp, self._gpus)
            if exp.dry_run:
                return RunResult(
                    status="dry_run", config_hash=prepared.config_hash, device=checks.device
                )
            run_dir = Path(run_dir)
            run_dir.mkdir(parents=True, exist_ok=True)
            result = new_result(
                prepared, checks.device, started_at, overrides, sweep, checks.warnings
            )
            try:
                self._measure(exp, checks.device, run_dir, result, reuse_model)
                result.status = "ok"
            except BaseException as exc:
                result.fail(ErrorInfo.from_exception(exc))
                raise
            finally:
                result.duration_s = round(time.perf_counter() - t_start, 3)
                result.write(run_dir)
            return result

    def close(self) -> None:
        """Free a model kept for reuse."""
        self._model.close()

    # ------------------------------------------------------------------ one run
    def _measure(
        self, exp: ExperimentConfig, device: str, run_dir: Path, result: RunResult, reuse: bool
    ) -> None:
        write_environment(run_dir / "environment.json", self._environment.snapshot(self._gpus))
        backend = create_backend(exp, run_dir)
        threads = settle_threads(exp, self.hydra)  # before the model loads (runner.threads)
        # the device whose energy is measured: a server's named GPUs, whatever llem's torch sees
        metered = metered_device(backend, device, exp.measurement, self._gpus)
        indices = measured_indices(exp, metered, backend)
        gpu = GpuSettings(exp.gpu, indices, self._gpus)  # the gpu section (runner.gpu_settings)
        session = self._session(exp, device, metered, indices, backend)
        loaded = None
        keep = False
        try:
            gpu.apply()  # before the idle baseline and the warm-up: both run under it
            if on_gpu(device):
                init_gpu_context()
            session.start()  # idle baseline: after CUDA init, before the model loads
            loaded = self._acquire(backend, device, reuse, result)
            session.count_as_own(loaded.workload_processes())  # a running server's processes
            measured, peaks = self._generate(exp, backend, loaded, session, result)
            batch_size = backend.batch_size(loaded)  # 0: the engine does not know it
            counts = fill_workload(
                result, measured.outputs, measured.passes, measured.n_prompts, batch_size or None
            )
            if not batch_size:
                result.null_reasons["workload.batch_size"] = UNKNOWN_BATCH
            report = session.measurement(
                output_tokens=counts.output_tokens,
                requests=counts.requests,
                input_tokens=counts.input_tokens,
            )
            bandwidths = fill_measurement(result, report, counts)
            gpu.check_window_end(result)
            threads.record(result)
            fill_compilations(result)
            fill_weights(result, exp)
            fill_memory(result, loaded, device, peaks)
            fill_prefix_cache(result, loaded, measured.outputs)
            fill_compute(result, loaded.shape, measured.outputs, exp, device, bandwidths)
            ran = Served(measured.outputs, measured.served, measured.n_prompts)
            fill_serving(result, exp, ran, session, backend, loaded, run_dir)
            self._engine_view(result, loaded, backend.name, session, run_dir)
            fill_quality(result, measured.task, ran, run_dir)  # after the window and its energy
            # layers, carbon, cost (a grid intensity for the window's hour asked for here)
            fill_footprint(exp, result, session.last_chassis(), session.last_window_start_utc())
            if exp.measurement.save_outputs:
                write_generations(run_dir, measured.outputs, measured.n_prompts)
            session.write_timeseries(run_dir / TIMESERIES_FILE)
            keep = reuse
        finally:
            try:
                gpu.restore()
                gpu.fill(result)
            finally:
                session.close()
                self._model.release(backend, loaded, keep)

    def _engine_view(
        self,
        result: RunResult,
        loaded: LoadedModel,
        engine: str,
        session: MeasurementSession,
        run_dir: Path,
    ) -> None:
        """The engine's own view of the window (a server's), written and judged, and where it
        speculated, its drafts' energy against its verification's."""
        facts = loaded.window_facts(run_dir, self._gpus, measured_here(result))
        if (used := write_window_facts(result, facts)) is not None:
            judge_engine_gpus(result, engine, used)  # against the GPUs measured
        fill_draft_energy(result, facts.draft_spans, session)

    def _session(
        self,
        exp: ExperimentConfig,
        device: str,
        metered: str,
        indices: list[int] | None,
        backend: Backend[object],
    ) -> MeasurementSession:
        """The run's measurement session over the GPUs ``indices`` (torch's numbering) of
        ``metered``, the device whose energy the run measures (``preflight.metered_device``). Its
        window synchronises CUDA only where llem itself runs on CUDA (``device``): a server's GPUs
        measured from a llem on the CPU hold nothing of llem's, and synchronising them would
        open a CUDA context of llem's on each."""
        return MeasurementSession(
            exp.measurement,
            torch_device_indices=indices,
            device_type=metered,
            cuda_sync=None if on_gpu(device) else no_sync,
            idle_cache=self.idle_cache,  # the Runner's idle baselines (llem.measure.idle)
            gpu_settings=requested_settings(exp.gpu),  # baselines are kept per GPU settings
            # a running server elsewhere, or on GPUs not named: this host's are not its
            energy_refused=backend.energy_refusal(exp.measurement),
            wall=wall_reader(exp),  # the chassis at the wall (chassis.source=auto|ipmitool)
            wall_interval_s=exp.chassis.interval_s,
            gpus=self._gpus,
        )

    def _generate(
        self,
        exp: ExperimentConfig,
        backend: Backend[object],
        loaded: LoadedModel,
        session: MeasurementSession,
        result: RunResult,
    ) -> tuple[_Measured, dict[str, Any] | None]:
        """Prompts, warm-up and cool-down, then whole passes over the prompts inside the measured
        window; returns the batches and the allocator peaks over the window (CUDA only)."""
        task = load_task(exp.dataset, loaded.tokenizer)
        prompt_set = prepare_prompts(exp.dataset, loaded.tokenizer, task)
        result.workload.chat_template_applied = prompt_set.chat_template_applied
        result.workload.stop_strings = prompt_stops(prompt_set.prompts)
        # offline generate runs take traffic.n_requests too: the prompts cycled to that many
        batches = backend.batches(offline_requests(exp, prompt_set.prompts))
        life = result.lifecycle
        life.seed = _seed(exp)
        t0 = time.perf_counter()
        # Warm-up (and any torch.compile, or its fallback to eager) stays out of the window;
        # lifecycle.torch_compile records what actually runs in it.
        backend.warm_up(loaded, batches, exp.measurement.warmup)
        life.torch_compile = loaded.torch_compile
        life.warmup_s = round(time.perf_counter() - t0, 3)
        cooled = session.cooldown()
        waited = cooled.get("cooldown_waited_s")
        life.cooldown_waited_s = None if waited is None else round(waited, 3)
        life.start_temp_c = cooled.get("start_temp_c")
        if life.start_temp_c is None:
            result.null_reasons["lifecycle.start_temp_c"] = no_temperature_reason(session)
        cuda_devices = model_gpu_indices(loaded)
        if cuda_devices:
            reset_peak_memory(cuda_devices)
        serving = plan(exp, prompt_set.prompts)  # send times drawn before the window
        compiled_before, calls_before = loaded.compilations(), loaded.forward_calls()
        measured = self._window(exp, backend, loaded, session, batches, serving)
        measured.n_prompts = len(prompt_set.prompts)
        measured.task = task
        compiled_after = loaded.compilations()
        if compiled_before is not None and compiled_after is not None:
            life.compilations_in_window = compiled_after - compiled_before
        label_eager_fallback(life, calls_before, loaded.forward_calls())
        peaks = peak_memory(cuda_devices) if cuda_devices else None
        return measured, peaks

    def _window(
        self,
        exp: ExperimentConfig,
        backend: Backend[object],
        loaded: LoadedModel,
        session: MeasurementSession,
        batches: list[list[Prompt]],
        serving: ServePlan | None,
    ) -> _Measured:
        """The measured window: the workload served once, or whole passes over the batches
        (stretched to measurement.min_window_s where energy is measured)."""
        outputs: list[BatchOutput] = []
        passes = 0
        progress = BatchProgress(len(batches), self.live_display)
        with session.window() as window:
            if serving is not None:
                served = serve_once(backend, loaded, serving)
                return _Measured([as_batch(served)], 1, 0, served)
            while passes < MAX_PASSES:
                for k, batch in enumerate(batches, 1):
                    outputs.append(backend.generate(loaded, batch))
                    progress.batch(passes + 1, k)
                passes += 1
                # Only a window that measures energy is stretched to min_window_s.
                if (
                    not session.measures_energy
                    or window.elapsed_s() >= exp.measurement.min_window_s
                ):
                    break
        progress.done()
        return _Measured(outputs, passes, 0)

    def _acquire(
        self, backend: Backend[object], device: str, reuse: bool, result: RunResult
    ) -> LoadedModel:
        """The model for this run (the kept one where it serves: ``KeptModel``), described in
        the result's lifecycle."""
        loaded, reused = self._model.acquire(backend, device, reuse)
        life = result.lifecycle
        result.dtype = loaded.dtype
        life.load_s = 0.0 if reused else round(loaded.load_s, 3)
        life.model_reused = reused
        life.model_source = loaded.source
        life.load_kwargs = loaded.load_kwargs
        # the engine's own section and device, if it states them (a server)
        write_engine_facts(result, loaded.engine_facts(), self._gpus)
        return loaded


def _seed(exp: ExperimentConfig) -> int:
    """Seed torch; a sampling decoder gets ``seed + repeat`` so repeats sample differently (the
    vLLM backend seeds its engine with it, ``llem.backends.vllm.kwargs.SAMPLING_SEED``)."""
    import torch

    seed = run_seed(exp)
    torch.manual_seed(seed)
    return seed

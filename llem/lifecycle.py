"""One run's lifecycle: validate, pre-flight, snapshot, load, warm up, measure, write, clean up.

``run(cfg, run_dir)`` is a plain function: the Hydra entrypoint calls it, and so do tests.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from llem.config.schema import ExperimentConfig
from llem.config.validate import config_hash, plain, to_experiment
from llem.errors import ConfigError, RunError
from llem.result import (
    Compute,
    Energy,
    ErrorInfo,
    Hardware,
    Percentiles,
    RunResult,
    SweepPosition,
    Thermal,
    Validity,
    quantization_label,
    utc_now,
)

if TYPE_CHECKING:
    from llem.backends.base import Backend, BatchOutput, LoadedModel
    from llem.measure import MeasurementSession

log = logging.getLogger("llem.run")

MAX_PASSES = 10_000


def _peak_rss_mb() -> float | None:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    except Exception:  # pragma: no cover - non-POSIX
        return None


@dataclass
class Prepared:
    """A checked configuration, with the backend settled (named in the config, or detected)."""

    exp: ExperimentConfig
    backend_chosen_by: str  # config | detected


def prepare(cfg: DictConfig | ExperimentConfig) -> Prepared:
    """Validate a composed config and settle the backend (detected when none is named)."""
    from llem.backends import detect_default_backend

    exp = to_experiment(cfg)
    if exp.backend is not None:
        return Prepared(exp, "config")
    exp.backend = detect_default_backend()
    if exp.backend is None:
        raise ConfigError("backend: no backend is usable here (install transformers)")
    return Prepared(exp, "detected")


def run(
    cfg: DictConfig | ExperimentConfig,
    run_dir: Path,
    overrides: list[str] | None = None,
    reuse_model: bool = False,
    sweep: SweepPosition | None = None,
) -> RunResult:
    """Run one configuration and write ``run_dir/result.json``; return the result.

    Configuration errors raise ``ConfigError`` and pre-flight failures ``PreflightError`` before
    anything is written. Once the run has started, any failure is recorded in result.json
    (``status: failed``) and re-raised. A dry run writes nothing and returns a result whose
    status is ``dry_run``.
    """
    from llem.preflight import preflight

    started_at, t_start = utc_now(), time.perf_counter()
    prepared = prepare(cfg)
    exp = prepared.exp
    checks = preflight(exp)
    if exp.dry_run:
        return RunResult(status="dry_run", config_hash=config_hash(exp), device=checks.device)

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    q = exp.quantization
    result = RunResult(
        status="failed",
        config_hash=config_hash(exp),
        overrides=list(overrides or []),
        started_at=started_at,
        config=plain(exp),
        model=exp.model.name_or_path,
        backend=exp.backend,
        device=checks.device,
        quantization=quantization_label(
            q.load_in_4bit,
            q.load_in_8bit,
            q.bnb_4bit_quant_type.value if q.bnb_4bit_quant_type else None,
        ),
        sweep=sweep,
    )
    result.lifecycle.backend_chosen_by = prepared.backend_chosen_by
    # Under SLURM: the job and node that produced this result (null elsewhere).
    result.lifecycle.slurm_job_id = os.environ.get("SLURM_JOB_ID") or None
    result.lifecycle.node = os.environ.get("SLURMD_NODENAME") or None
    result.lifecycle.preflight_warnings = list(checks.warnings)
    try:
        _measure(exp, checks.device, run_dir, result, reuse_model)
        result.status = "ok"
    except BaseException as exc:
        result.fail(ErrorInfo.from_exception(exc))
        raise
    finally:
        result.duration_s = round(time.perf_counter() - t_start, 3)
        result.write(run_dir)
    return result


def _measure(
    exp: ExperimentConfig, device: str, run_dir: Path, result: RunResult, reuse_model: bool
) -> None:
    from llem.backends import get_backend
    from llem.backends.memory import peak_memory, reset_peak_memory
    from llem.environment import write_environment
    from llem.generations import write_generations
    from llem.measure import MeasurementSession
    from llem.prompts import prepare_prompts
    from llem.sweep import reuse

    write_environment(run_dir / "environment.json")
    backend = get_backend(exp.backend or "pytorch")
    torch_indices = _torch_indices(exp, device, backend)
    session = MeasurementSession(
        exp.measurement, torch_device_indices=torch_indices, device_type=device
    )
    loaded = None
    keep = False
    try:
        if device == "cuda":
            _init_cuda()
        session.start()  # idle baseline: after CUDA init, before the model loads
        key = backend.load_key(exp, device)
        loaded, reused = reuse.acquire(
            backend, key, lambda: backend.load(exp, device), reuse=reuse_model
        )
        result.dtype = loaded.dtype
        life = result.lifecycle
        life.load_s = 0.0 if reused else round(loaded.load_s, 3)
        life.model_reused = reused
        life.model_source = loaded.source
        life.load_kwargs = loaded.load_kwargs
        prompt_set = prepare_prompts(exp.dataset, loaded.tokenizer)
        prompts = prompt_set.prompts
        result.workload.chat_template_applied = prompt_set.chat_template_applied
        batches = backend.batches(exp, prompts)

        life.seed = _seed(exp)
        t0 = time.perf_counter()
        # Warm-up (and any torch.compile, or its fallback to eager) stays out of the window;
        # lifecycle.torch_compile records what actually runs in it.
        life.torch_compile = backend.warm_up(loaded, exp, batches).get("torch_compile")
        life.warmup_s = round(time.perf_counter() - t0, 3)
        cooled = session.cooldown()
        life.cooldown_waited_s = cooled.get("cooldown_waited_s")
        life.start_temp_c = cooled.get("start_temp_c")
        cuda_devices = _model_cuda_devices(loaded, device)
        if cuda_devices:
            reset_peak_memory(cuda_devices)

        outputs = []
        passes = 0
        progress = _Progress(len(batches))
        with session.window() as window:
            while passes < MAX_PASSES:
                for k, batch in enumerate(batches, 1):
                    outputs.append(backend.generate(loaded, exp, batch))
                    progress.batch(passes + 1, k)
                passes += 1
                # Only a window that measures energy is stretched to min_window_s.
                if session.source is None or window.elapsed_s() >= exp.measurement.min_window_s:
                    break
        progress.done()
        _fill_figures(exp, device, loaded, session, outputs, passes, len(prompts), result)
        if cuda_devices:
            peaks = peak_memory(cuda_devices)
            result.memory.peak_allocated_mb = peaks["peak_allocated_mb"]
            result.memory.peak_reserved_mb = peaks["peak_reserved_mb"]
            result.memory.per_device = peaks["per_device"]
        if exp.measurement.save_outputs:
            write_generations(run_dir, outputs, len(prompts))
        session.write_timeseries(run_dir / "timeseries.csv")
        keep = reuse_model
    finally:
        session.close()
        reuse.release(backend, loaded, keep=keep)


class _Progress:
    """Batches of the current run: a live line on a terminal, a log line per pass otherwise."""

    def __init__(self, n_batches: int) -> None:
        from llem.sweep.display import RUN_VIEW as STATE

        self.n = n_batches
        self.tty = sys.stderr.isatty() and not STATE.live_display  # the sweep's display is live
        self.t0 = time.perf_counter()

    def batch(self, pass_no: int, k: int) -> None:
        elapsed = time.perf_counter() - self.t0
        if self.tty:
            sys.stderr.write(f"\r  pass {pass_no} · batch {k}/{self.n} · {elapsed:.1f} s   ")
            sys.stderr.flush()
        elif k == self.n:
            log.info("pass %d done: %d batches in %.1f s", pass_no, self.n, elapsed)

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def _init_cuda() -> None:
    """Create the CUDA context now, so the idle baseline sees the GPU as the run will."""
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()


def _seed(exp: ExperimentConfig) -> int:
    """Seed torch; a sampling decoder gets ``seed + repeat`` so repeats sample differently."""
    import torch

    seed = exp.seed + exp.repeat if exp.decoder.do_sample else exp.seed
    torch.manual_seed(seed)
    return seed


def _model_cuda_devices(loaded: Any, device: str) -> list[int]:
    """The torch CUDA indices holding the model (the current device when none is known)."""
    if device != "cuda":
        return []
    shape = getattr(loaded, "shape", None)
    if shape is not None and shape.cuda_devices:
        return list(shape.cuda_devices)
    import torch

    return [torch.cuda.current_device()]


def _torch_indices(exp: ExperimentConfig, device: str, backend: Backend) -> list[int] | None:
    """The torch CUDA indices to measure: measurement.gpu_indices, else where the model goes."""
    if device != "cuda":
        return None
    if exp.measurement.gpu_indices is not None:
        return list(exp.measurement.gpu_indices)
    return backend.torch_device_indices(exp)


def _fill_figures(
    exp: ExperimentConfig,
    device: str,
    loaded: LoadedModel,
    session: MeasurementSession,
    outputs: list[BatchOutput],
    passes: int,
    n_prompts: int,
    result: RunResult,
) -> None:
    from llem.latency import LatencySamples, percentiles

    reasons = result.null_reasons
    out_tokens = sum(sum(b.output_tokens) for b in outputs)
    in_tokens = sum(sum(b.input_tokens) for b in outputs)
    requests = sum(len(b.output_tokens) for b in outputs)
    generate_s = sum(b.end_s - b.start_s for b in outputs)

    w = result.workload
    batch_size = loaded.notes.get("batch_size", exp.pytorch.batch_size)
    w.n_prompts, w.batch_size, w.passes = n_prompts, batch_size, passes
    w.input_tokens, w.output_tokens, w.requests = in_tokens, out_tokens, requests
    samples = LatencySamples()
    for b in outputs:
        samples.add_batch(b)
    lat = result.latency
    lat.generate_s = round(generate_s, 6)
    for key, values, scale in (
        ("ttft_ms", samples.ttft_s, 1000.0),
        ("itl_ms", samples.itl_s, 1000.0),
        ("request_latency_s", samples.request_s, 1.0),
    ):
        pct = percentiles(values, scale)
        if pct is None:
            reasons[f"latency.{key}"] = (
                "no request produced more than one token"
                if key == "itl_ms"
                else "no tokens were generated"
            )
        else:
            setattr(lat, key, Percentiles(**{k: round(v, 4) for k, v in pct.items()}))
    if generate_s > 0:
        result.throughput.generate_output_tokens_per_s = round(out_tokens / generate_s, 3)

    report = session.report(output_tokens=out_tokens, requests=requests, input_tokens=in_tokens)
    result.energy = Energy(**report.energy)
    result.validity = Validity(**report.validity.to_dict())
    result.energy.definition = (
        "j_per_output_token = total_j / output tokens; total_j is the whole measured window "
        "(idle power included; see idle_adjusted_j)"
    )
    window_s = report.window_s
    if window_s > 0:  # the window energy is measured over: tokens/s and J/token agree
        result.throughput.output_tokens_per_s = round(out_tokens / window_s, 3)
        result.throughput.requests_per_s = round(requests / window_s, 4)
    _fill_hardware(result.hardware, report.devices)
    result.thermal = Thermal(**report.thermal)
    reasons.update(report.null_reasons)
    mem = result.memory
    mem.peak_device_used_mb = report.peak_device_used_mb
    mem.peak_host_rss_mb = _peak_rss_mb()
    if loaded.notes.get("engine_process"):  # the model lives in other processes (vllm)
        mem.peak_host_rss_mb = None
        for k in ("peak_allocated_mb", "peak_reserved_mb", "peak_host_rss_mb"):
            reasons[f"memory.{k}"] = loaded.notes["engine_process"]
    elif device != "cuda":
        for k in ("peak_allocated_mb", "peak_reserved_mb"):
            reasons[f"memory.{k}"] = "torch allocator statistics exist for CUDA devices only"
    if mem.peak_device_used_mb is None:
        reasons.setdefault("memory.peak_device_used_mb", "NVML memory readings unavailable")

    from llem.compute import compute_figures

    bandwidths = {
        int(d["torch_index"]): d.get("memory_bandwidth_bytes_per_s")
        for d in report.devices
        if d.get("torch_index") is not None
    }
    figures = compute_figures(loaded.shape, outputs, exp, device, bandwidths)
    result.compute = Compute(**figures.as_dict())
    reasons.update(figures.null_reasons)


def _fill_hardware(hw: Hardware, devices: list[dict[str, Any]]) -> None:
    import socket

    hw.hostname = socket.gethostname()
    hw.gpus = [
        {k: d.get(k) for k in ("uuid", "name", "memory_total_mb", "power_limit_w")} for d in devices
    ]
    hw.gpu_count = len(devices)
    names = sorted({str(d.get("name")) for d in devices})
    hw.gpu_model = " + ".join(names) if names else None


def summary_line(result: RunResult, run_dir: Path) -> str:
    w, t, e = result.workload, result.throughput, result.energy
    total, jpt = e.total_j, e.j_per_output_token
    if e.source == "unavailable":
        energy = f"energy unavailable: {e.unavailable_reason}"
        if e.cpu_package_j is not None:
            energy += f"; CPU package {e.cpu_package_j:.1f} J (RAPL)"
    elif total is None:
        energy = f"energy not measured ({e.source}): " + "; ".join(e.warnings)
    else:
        energy = f"energy {total:.1f} J ({e.source})" + (
            f", {jpt:.4f} J/token" if jpt is not None else ""
        )
    rate = t.output_tokens_per_s
    return (
        f"llem: {result.model} on {result.device} ({result.dtype}): "
        f"{w.requests} requests, {w.output_tokens} output tokens in "
        f"{result.latency.generate_s or 0.0:.2f} s = {rate or 0.0:.1f} tokens/s; "
        f"{energy}\nresult: {Path(run_dir) / 'result.json'}"
    )


__all__ = ["run", "prepare", "summary_line", "RunError"]

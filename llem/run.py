"""One run's lifecycle: validate, pre-flight, snapshot, load, warm up, measure, write, clean up.

``run(cfg, run_dir)`` is a plain function: the Hydra entrypoint calls it, and so do tests.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from omegaconf import DictConfig

from llem.config.schema import ExperimentConfig
from llem.config.validate import config_hash, plain, to_experiment
from llem.errors import ConfigError, LlemError, RunError, first_line
from llem.result import quantization_label, skeleton, utc_now, write_result

log = logging.getLogger("llem.run")

MAX_PASSES = 10_000


def _peak_rss_mb() -> Optional[float]:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    except Exception:  # pragma: no cover - non-POSIX
        return None


def prepare(cfg: DictConfig | ExperimentConfig) -> ExperimentConfig:
    """Validate a composed config and settle the backend (detected when none is named)."""
    from llem.backends import detect_default_backend

    exp = to_experiment(cfg)
    if exp.backend is None:
        exp.backend = detect_default_backend()
        if exp.backend is None:
            raise ConfigError("backend: no backend is usable here (install transformers)")
        exp._backend_detected = True  # type: ignore[attr-defined]
    return exp


def run(
    cfg: DictConfig | ExperimentConfig,
    run_dir: Path,
    overrides: Optional[List[str]] = None,
    reuse_model: bool = False,
) -> Dict[str, Any]:
    """Run one configuration and write ``run_dir/result.json``; return the result dict.

    Configuration errors raise ``ConfigError`` and pre-flight failures ``PreflightError`` before
    anything is written. Once the run has started, any failure is recorded in result.json
    (``status: failed``) and re-raised.
    """
    from llem.preflight import preflight

    started_at, t_start = utc_now(), time.perf_counter()
    exp = prepare(cfg)
    checks = preflight(exp)
    if exp.dry_run:
        return {"status": "dry_run", "config_hash": config_hash(exp), "device": checks.device}

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    result = skeleton(
        status="failed",
        config_hash=config_hash(exp),
        overrides=overrides or [],
        started_at=started_at,
        config=plain(exp),
    )
    result.update(
        model=exp.model.name_or_path,
        backend=exp.backend,
        device=checks.device,
        quantization=quantization_label(
            exp.quantization.load_in_4bit,
            exp.quantization.load_in_8bit,
            exp.quantization.bnb_4bit_quant_type.value
            if exp.quantization.bnb_4bit_quant_type
            else None,
        ),
    )
    result["lifecycle"] = {
        "backend_chosen_by": "detected" if getattr(exp, "_backend_detected", False) else "config",
        "preflight_warnings": checks.warnings,
    }
    try:
        _measure(exp, checks.device, run_dir, result, reuse_model)
        result["status"] = "ok"
    except BaseException as exc:
        if isinstance(exc, LlemError):
            result["error"] = exc.to_dict()
        elif isinstance(exc, KeyboardInterrupt):
            result["error"] = {"type": "KeyboardInterrupt", "message": "interrupted", "hint": None}
        else:
            result["error"] = {
                "type": type(exc).__name__,
                "message": first_line(exc),
                "hint": "see llem.log in the run directory for the traceback",
            }
        raise
    finally:
        result["duration_s"] = round(time.perf_counter() - t_start, 3)
        write_result(run_dir, result)
    return result


def _measure(
    exp: ExperimentConfig, device: str, run_dir: Path, result: Dict[str, Any], reuse_model: bool
) -> None:
    from llem.backends import get_backend
    from llem.backends.base import split_batches
    from llem.environment import write_environment
    from llem.measure import MeasurementSession
    from llem.prompts import load_prompts
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
        result["dtype"] = loaded.dtype
        result["lifecycle"].update(
            load_s=0.0 if reused else round(loaded.load_s, 3),
            model_reused=reused,
            model_source=loaded.source,
            load_kwargs=loaded.load_kwargs,
            torch_compile=loaded.notes.get("torch_compile"),
        )
        prompts = load_prompts(exp.dataset, loaded.tokenizer)
        batches = split_batches(backend, exp, prompts)

        _seed(exp.seed)
        t0 = time.perf_counter()
        for i in range(exp.measurement.warmup):
            backend.generate(loaded, exp, batches[i % len(batches)])
        result["lifecycle"]["warmup_s"] = round(time.perf_counter() - t0, 3)
        result["lifecycle"].update(session.cooldown())
        _reset_peak_memory(device)

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
        session.write_timeseries(run_dir / "timeseries.csv")
        keep = reuse_model
    finally:
        session.close()
        reuse.release(backend, loaded, keep=keep)


class _Progress:
    """Batches of the current run: a live line on a terminal, a log line per pass otherwise."""

    def __init__(self, n_batches: int) -> None:
        self.n = n_batches
        self.tty = sys.stderr.isatty()
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


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def _torch_indices(exp: ExperimentConfig, device: str, backend: Any) -> Optional[List[int]]:
    if device != "cuda":
        return None
    if exp.measurement.gpu_indices is not None:
        return list(exp.measurement.gpu_indices)
    if hasattr(backend, "torch_device_indices"):  # engines that place the model themselves
        return list(backend.torch_device_indices(exp))
    import torch

    # The GPUs the model will be placed on: device_map "cuda" (llem's default) means the current
    # device; any other map (e.g. "auto") may spread over every visible GPU.
    if exp.pytorch.device_map in (None, "cuda"):
        return [torch.cuda.current_device()]
    return list(range(torch.cuda.device_count()))


def _reset_peak_memory(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def _fill_figures(
    exp: ExperimentConfig,
    device: str,
    loaded: Any,
    session: Any,
    outputs: List[Any],
    passes: int,
    n_prompts: int,
    result: Dict[str, Any],
) -> None:
    from llem.latency import LatencySamples, decode_time_and_steps, percentiles

    reasons: Dict[str, str] = result["null_reasons"]
    out_tokens = sum(sum(b.output_tokens) for b in outputs)
    in_tokens = sum(sum(b.input_tokens) for b in outputs)
    requests = sum(len(b.output_tokens) for b in outputs)
    generate_s = sum(b.end_s - b.start_s for b in outputs)

    result["workload"].update(
        n_prompts=n_prompts,
        batch_size=loaded.notes.get("batch_size", exp.pytorch.batch_size),
        input_tokens=in_tokens,
        output_tokens=out_tokens,
        passes=passes,
        requests=requests,
    )
    samples = LatencySamples()
    for b in outputs:
        samples.add_batch(b)
    lat = result["latency"]
    lat["generate_s"] = round(generate_s, 6)
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
            lat[key] = {k: round(v, 4) for k, v in pct.items()}
    if generate_s > 0:
        result["throughput"]["output_tokens_per_s"] = round(out_tokens / generate_s, 3)
        result["throughput"]["requests_per_s"] = round(requests / generate_s, 4)

    report = session.report(output_tokens=out_tokens, requests=requests)
    result["energy"] = dict(report.energy)
    result["energy"]["definition"] = (
        "j_per_output_token = total_j / output tokens; total_j is the whole measured window "
        "(idle power included; see idle_adjusted_j)"
    )
    result["thermal"] = dict(report.thermal)
    reasons.update(report.null_reasons)
    mem = result["memory"]
    mem["peak_device_used_mb"] = report.peak_device_used_mb
    mem["peak_host_rss_mb"] = _peak_rss_mb()
    if loaded.notes.get("engine_process"):  # the model lives in other processes (vllm)
        mem["peak_host_rss_mb"] = None
        for k in ("peak_allocated_mb", "peak_reserved_mb", "peak_host_rss_mb"):
            reasons[f"memory.{k}"] = loaded.notes["engine_process"]
    elif device == "cuda":
        import torch

        mem["peak_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        mem["peak_reserved_mb"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    else:
        for k in ("peak_allocated_mb", "peak_reserved_mb"):
            reasons[f"memory.{k}"] = "torch allocator statistics exist for CUDA devices only"
    if mem["peak_device_used_mb"] is None:
        reasons.setdefault("memory.peak_device_used_mb", "NVML memory readings unavailable")

    if loaded.n_parameters is None:
        reasons["compute.flops_estimate"] = "the parameter count is unknown (no safetensors found)"
    else:
        non_emb = loaded.n_parameters - loaded.n_embedding_parameters
        result["compute"]["flops_estimate"] = float(2 * non_emb * (in_tokens + out_tokens))
        result["compute"]["non_embedding_parameters"] = non_emb
    decode_s, steps = decode_time_and_steps(outputs)
    bandwidths = [d.get("memory_bandwidth_bytes_per_s") for d in report.devices]
    if device != "cuda":
        reasons["compute.decode_bandwidth_utilisation"] = (
            "needs a GPU's memory bandwidth (from NVML); this run is on the CPU"
        )
    elif not bandwidths or any(b is None for b in bandwidths):
        reasons["compute.decode_bandwidth_utilisation"] = "device memory bandwidth unknown"
    elif loaded.weight_bytes_per_decode_step is None:
        reasons["compute.decode_bandwidth_utilisation"] = "the weights' size is unknown"
    elif decode_s <= 0 or steps == 0:
        reasons["compute.decode_bandwidth_utilisation"] = "no decode steps were timed"
    else:
        achieved = loaded.weight_bytes_per_decode_step * steps / decode_s
        result["compute"]["decode_bandwidth_utilisation"] = round(achieved / sum(bandwidths), 4)
        result["compute"]["decode_bytes_per_s"] = achieved


def summary_line(result: Dict[str, Any], run_dir: Path) -> str:
    w, t, e = result["workload"], result["throughput"], result["energy"]
    total, jpt = e.get("total_j"), e.get("j_per_output_token")
    if e.get("source") == "unavailable":
        energy = f"energy unavailable: {e.get('unavailable_reason')}"
        if e.get("cpu_package_j") is not None:
            energy += f"; CPU package {e['cpu_package_j']:.1f} J (RAPL)"
    elif total is None:
        energy = f"energy not measured ({e.get('source')}): " + "; ".join(e.get("warnings") or [])
    else:
        energy = f"energy {total:.1f} J ({e.get('source')})" + (
            f", {jpt:.4f} J/token" if jpt is not None else ""
        )
    return (
        f"llem: {result['model']} on {result['device']} ({result['dtype']}): "
        f"{w['requests']} requests, {w['output_tokens']} output tokens in "
        f"{result['latency']['generate_s']:.2f} s = {t['output_tokens_per_s']:.1f} tokens/s; "
        f"{energy}\nresult: {Path(run_dir) / 'result.json'}"
    )


__all__ = ["run", "prepare", "summary_line", "RunError"]

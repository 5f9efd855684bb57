"""Assembling a run's result: the opening record, then the figures from the measured batches, the
measurement session's report, memory and compute.

``fill_measurement`` is the one place that reads the measurement session's ``Measurement``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from llem.config.pytorch import CacheImplementation
from llem.config.schema import ExperimentConfig
from llem.devices.gpu import on_gpu
from llem.figures.compute import compute_figures
from llem.measure import Measurement, MeasurementSession
from llem.measure.energy_section import Counts
from llem.plain import json_ready
from llem.result import (
    Compute,
    Figure,
    Lifecycle,
    RunResult,
    SweepPosition,
    quantization_label,
)
from llem.runner.prepare import Prepared
from llem.vocabulary.model import LoadedModel, ModelShape
from llem.vocabulary.workload import BatchOutput

NO_PREFIX_CACHE = "this engine has no prefix cache (it computes every prompt token)"


def new_result(
    prepared: Prepared,
    device: str,
    started_at: str,
    overrides: list[str] | None,
    sweep: SweepPosition | None,
    preflight_warnings: list[str],
) -> RunResult:
    """The result as it stands when the run starts (status failed until it ends well)."""
    exp = prepared.exp
    q = exp.quantization
    result = RunResult(
        status="failed",
        config_hash=prepared.config_hash,
        overrides=list(overrides or []),
        started_at=started_at,
        config=json_ready(exp),
        model=exp.model.name_or_path,
        backend=exp.backend,
        device=device,
        quantization=quantization_label(
            q.load_in_4bit,
            q.load_in_8bit,
            q.bnb_4bit_quant_type.value if q.bnb_4bit_quant_type else None,
        ),
        sweep=sweep,
    )
    life = result.lifecycle
    life.backend_chosen_by = prepared.backend_chosen_by
    # Under SLURM: the job and node that produced this result (null elsewhere).
    life.slurm_job_id = os.environ.get("SLURM_JOB_ID") or None
    life.node = os.environ.get("SLURMD_NODENAME") or None
    life.preflight_warnings = list(preflight_warnings)
    # the run writes the section after the window, from the engine's facts (``window_facts``)
    method = exp.speculative.method.value
    result.null_reasons["speculative"] = (
        "speculative=none"
        if method == "none"
        else f"speculative={method}: not counted (the run ended before its measured window did)"
    )
    return result


def fill_workload(
    result: RunResult,
    outputs: Sequence[BatchOutput],
    passes: int,
    n_prompts: int,
    batch_size: int | None,
) -> Counts:
    """Workload counts (real tokens and requests: no padding, nothing past EOS) and the
    generate-only rate; returns the counts."""
    counts = Counts(
        output_tokens=sum(sum(b.output_tokens) for b in outputs),
        input_tokens=sum(sum(b.input_tokens) for b in outputs),
        requests=sum(len(b.output_tokens) for b in outputs),
    )
    out_tokens = counts.output_tokens
    generate_s = sum(b.end_s - b.start_s for b in outputs)
    w = result.workload
    w.n_prompts, w.batch_size, w.passes = n_prompts, batch_size, passes
    w.input_tokens, w.output_tokens = counts.input_tokens, out_tokens
    w.requests = counts.requests
    # latency percentiles are the serving sections' (llem.runner.serving), for every run
    result.latency.generate_s = round(generate_s, 6)
    if generate_s > 0:
        result.throughput.generate_output_tokens_per_s = round(out_tokens / generate_s, 3)
    return counts


def fill_measurement(
    result: RunResult, measurement: Measurement, counts: Counts
) -> dict[int, float | None]:
    """Energy, validity, window rates, hardware, thermal and device memory from the measurement
    session's typed sections; returns each measured torch CUDA device's memory bandwidth
    (bytes/s), for the compute estimates."""
    m = measurement
    result.energy, result.thermal, result.validity = m.energy, m.thermal, m.validity
    result.hardware = m.hardware
    result.boundary = m.boundary  # what the energy covers (llem.measure.boundary_section)
    if m.window_s > 0:  # the window energy is measured over: tokens/s and J/token agree
        result.throughput.output_tokens_per_s = round(counts.output_tokens / m.window_s, 3)
        result.throughput.requests_per_s = round(counts.requests / m.window_s, 4)
    result.null_reasons.update(m.null_reasons)
    result.set_figure("memory.peak_device_used_mb", m.peak_device_used_mb)
    return m.memory_bandwidth_by_torch_index()


def label_eager_fallback(
    life: Lifecycle, before: tuple[int, int] | None, after: tuple[int, int] | None
) -> None:
    """``lifecycle.eager_calls_in_window`` from the running (forward, eager) call counts across
    the window, and ``lifecycle.torch_compile`` saying what ran when any call ran eagerly."""
    if before is None or after is None:
        return
    total, eager = after[0] - before[0], after[1] - before[1]
    life.eager_calls_in_window = eager
    if eager and life.torch_compile == "active":
        life.torch_compile = (
            f"eager fallback: {eager} of {total} forward calls in the window ran eagerly "
            "(Dynamo's recompile limit, torch._dynamo.config.recompile_limit)"
        )


def no_temperature_reason(session: MeasurementSession) -> str:
    """Why ``lifecycle.start_temp_c`` is null: no GPU read, or none reported a temperature."""
    why = session.no_gpu_reason or session.unavailable_reason
    return f"no GPU temperature readings ({why})" if why else "no GPU reported its temperature"


def explain_compile_counts(result: RunResult) -> None:
    """Why ``lifecycle.compilations_in_window`` and ``eager_calls_in_window`` are null."""
    life = result.lifecycle
    why = (
        "torch.compile is off (pytorch.torch_compile=false): nothing compiles in the window"
        if life.torch_compile is None
        else f"the engine did not count its compilations (lifecycle.torch_compile: "
        f"{life.torch_compile})"
    )
    for key in ("compilations_in_window", "eager_calls_in_window"):
        if getattr(life, key) is None:
            result.null_reasons[f"lifecycle.{key}"] = why


def fill_compilations(result: RunResult) -> None:
    """With torch.compile on, the check ``compilations_in_window``: a compilation inside the
    window puts compile time into the measured energy and time, so it fails the check, adds its
    problem and makes a measured energy invalid. Forward calls that ran eagerly (Dynamo's
    recompile limit: no compile time, but not the compiled model either) are a condition."""
    explain_compile_counts(result)
    life = result.lifecycle
    n = life.compilations_in_window
    if n is None:
        return
    v = result.validity
    eager = life.eager_calls_in_window or 0
    status = "failed" if n else ("condition" if eager else "passed")
    checks = {**v.checks, "compilations_in_window": status}
    problems, conditions = list(v.problems), list(v.conditions)
    if n:
        problems.append(
            f"torch.compile compiled {n} time(s) inside the measured window (a batch shape the "
            "warm-up did not cover, or a frame reaching Dynamo's recompile limit): the window's "
            "time and energy include compilation."
        )
    if eager:
        conditions.append(
            f"torch.compile ran {eager} forward call(s) in the measured window eagerly: Dynamo's "
            "recompile limit (torch._dynamo.config.recompile_limit) had stopped it compiling new "
            "shapes, so the figures are those of that mix (lifecycle.torch_compile), as "
            "torch.compile runs this workload, not of a fully compiled model."
        )
    result.validity = dataclasses.replace(
        v, checks=checks, problems=problems, conditions=conditions
    )
    if n and v.energy_valid:
        result.set_figure("validity.energy_valid", Figure(False))


def fill_memory(
    result: RunResult, loaded: LoadedModel, device: str, peaks: dict[str, Any] | None
) -> None:
    """Allocator peaks (``peaks``: from ``llem.backends.memory.peak_memory``, CUDA only), the
    host's peak RSS, and why a figure is absent: a figure is a value or null with its reason,
    never both. An engine in processes of its own (vllm) is not seen by this process's allocator
    or RSS: those are null with the reason (never this process's near-zero readings)."""
    mem, reasons = result.memory, result.null_reasons
    if mem.peak_device_used_mb is None:
        reasons.setdefault("memory.peak_device_used_mb", "NVML memory readings unavailable")
    if loaded.engine_process:  # the model lives in other processes (vllm)
        mem.peak_allocated_mb = mem.peak_reserved_mb = mem.peak_host_rss_mb = None
        mem.per_device = {}
        for k in ("peak_allocated_mb", "peak_reserved_mb", "peak_host_rss_mb"):
            reasons[f"memory.{k}"] = loaded.engine_process
        return
    if peaks is not None:
        mem.peak_allocated_mb = peaks["peak_allocated_mb"]
        mem.peak_reserved_mb = peaks["peak_reserved_mb"]
        mem.per_device = peaks["per_device"]
    mem.peak_host_rss_mb = _peak_rss_mb()
    if not on_gpu(device):
        for k in ("peak_allocated_mb", "peak_reserved_mb"):
            reasons[f"memory.{k}"] = "torch allocator statistics exist for CUDA devices only"


def fill_prefix_cache(
    result: RunResult, loaded: LoadedModel, outputs: Sequence[BatchOutput]
) -> None:
    """Whether the engine's prefix cache was on, and the share of the window's prompt tokens it
    served instead of prefill (engines without a prefix cache leave both null)."""
    life = result.lifecycle
    life.prefix_caching = loaded.prefix_caching
    if loaded.prefix_caching is None:
        for key in ("prefix_caching", "prefix_cache_hit_rate"):
            result.null_reasons[f"lifecycle.{key}"] = NO_PREFIX_CACHE
        return
    cached = [b.cached_input_tokens for b in outputs]
    prompt_tokens = sum(sum(b.input_tokens) for b in outputs)
    if any(c is None for c in cached):
        result.null_reasons["lifecycle.prefix_cache_hit_rate"] = (
            "the engine did not report its prefix-cache hits (RequestOutput.num_cached_tokens)"
        )
    elif prompt_tokens == 0:
        result.null_reasons["lifecycle.prefix_cache_hit_rate"] = "no prompt tokens in the window"
    else:
        hits = sum(sum(c or []) for c in cached)
        life.prefix_cache_hit_rate = round(hits / prompt_tokens, 4)


def _peak_rss_mb() -> float | None:
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    except Exception:  # pragma: no cover - non-POSIX
        return None


def fill_compute(
    result: RunResult,
    shape: ModelShape | None,
    outputs: Sequence[BatchOutput],
    exp: ExperimentConfig,
    device: str,
    bandwidths: dict[int, float | None],
) -> None:
    cache: CacheImplementation | None = exp.pytorch.cache_implementation
    figures = compute_figures(
        shape, outputs, device, bandwidths, cache=cache, max_new_tokens=exp.decoder.max_new_tokens
    )
    result.compute = Compute(**figures.as_dict())
    result.null_reasons.update(figures.null_reasons)
    result.null_reasons["compute.non_embedding_parameters"] = (
        "a field of result schema 1, kept for reading older files: compute.matmul_parameters "
        "replaced it"
    )

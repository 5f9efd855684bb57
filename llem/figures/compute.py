"""Compute estimates for a run: FLOPs and decode memory-bandwidth utilisation.

Both are estimates from the model's shape and the tokens that were generated, not counters.

FLOPs (forward pass only)::

    flops_estimate = 2 x N_matmul x num_beams x (input tokens + output tokens)
    N_matmul       = parameters - input embedding + LM head (when tied to the input embedding)

The input embedding is a table lookup (no multiply-adds); the LM head is a matmul on every token
even when its weight is shared with the input embedding, so for a tied model N_matmul equals the
parameter count. Parameters are counted as the model has them before quantization (bitsandbytes
packs two 4-bit weights into a byte; that packing is undone here). Beam search runs every beam
through prefill and decode, so the work is multiplied by ``num_beams``. Padding, rows that keep
decoding after their EOS and attention-score FLOPs (2 x layers x context x head width per token)
are not counted.

Decode bandwidth utilisation (GPU only)::

    bytes(step) = weight bytes + rows x num_beams x KV bytes(context(step))
    utilisation = sum of bytes over decode steps / decode seconds / bandwidth of one GPU

Weight bytes are the stored bytes of every weight but the input embedding (the LM head counted
once even when tied), read once per step. ``KV bytes(context)`` is what attention reads from the
KV cache: 2 (K and V) x KV heads x head size x cache element size per layer and position, over
``context`` positions per layer (capped at a sliding window where a layer has one). ``context``
at decode step j is the padded prompt width plus the tokens generated before it; rows are all
rows of the padded batch (finished rows still decode until the batch ends); a static cache is read
at its full preallocated length. Decode steps are the steps after the first token. With
``device_map=auto`` the layers run one GPU at a time, so a step's bytes flow through one GPU's
memory at a time: the divisor is one GPU's bandwidth, not the sum.

Null, with a reason, where the formula does not hold: mixture-of-experts models (a step reads only
the routed experts; FLOPs likewise), weights or KV cache offloaded to the CPU or disk, an
architecture whose KV-cache layout is not known, CPU runs, unknown or unequal GPU bandwidths.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llem.config.pytorch import CacheImplementation
from llem.figures.latency import decode_time_and_steps
from llem.vocabulary.model import ModelShape
from llem.vocabulary.workload import BatchOutput

UNKNOWN_SHAPE = "this backend does not describe its model's shape"
# The decode-traffic figures, computed together (null together, with one reason).
DECODE_TRAFFIC = (
    "decode_bandwidth_utilisation",
    "decode_bytes_per_s",
    "decode_weight_bytes",
    "decode_kv_bytes",
)


@dataclass(frozen=True)
class ComputeFigures:
    flops_estimate: float | None
    parameters: int  # real count (quantization packing undone)
    matmul_parameters: int
    decode_bandwidth_utilisation: float | None
    decode_bytes_per_s: float | None
    decode_weight_bytes: int | None  # summed over the timed decode steps
    decode_kv_bytes: int | None  # summed over the timed decode steps
    bandwidth_bytes_per_s: float | None  # the one-GPU divisor
    null_reasons: dict[str, str] = field(default_factory=dict)  # "compute.<key>" -> why

    def as_dict(self) -> dict[str, Any]:
        util = self.decode_bandwidth_utilisation
        return {
            "flops_estimate": self.flops_estimate,
            "flops_formula": "2 x (parameters - input embedding + tied LM head) x num_beams x "
            "(input + output tokens)",
            "parameters": self.parameters,
            "matmul_parameters": self.matmul_parameters,
            "decode_bandwidth_utilisation": None if util is None else round(util, 4),
            "decode_bytes_per_s": self.decode_bytes_per_s,
            "decode_weight_bytes": self.decode_weight_bytes,
            "decode_kv_bytes": self.decode_kv_bytes,
            "memory_bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
        }


def _beams(batch: BatchOutput) -> int:
    return max(1, int(getattr(batch, "num_beams", 1) or 1))


def decode_bytes(
    shape: ModelShape, batch: BatchOutput, static_cache_len: int | None
) -> tuple[int, int]:
    """(weight bytes, KV bytes) read over one batch's timed decode steps (after the first token)."""
    assert shape.kv is not None
    steps = len(batch.step_times_s)
    if steps < 2:
        return 0, 0
    rows = len(batch.input_tokens) * _beams(batch)
    width = max(batch.input_tokens, default=0)
    generated_before = list(itertools.accumulate(batch.step_tokens))
    kv = 0
    for j in range(1, steps):
        context = static_cache_len if static_cache_len else width + generated_before[j - 1]
        kv += rows * shape.kv.bytes_read(context)
    return shape.weight_bytes * (steps - 1), kv


def compute_figures(
    shape: ModelShape | None,
    batches: Sequence[BatchOutput],
    device: str,
    bandwidths: Mapping[int, float | None],
    cache: CacheImplementation | None = None,
    max_new_tokens: int = 0,
) -> ComputeFigures:
    """FLOPs and decode bandwidth utilisation of the measured batches.

    ``bandwidths`` maps torch CUDA device indices to their memory bandwidth in bytes/s (None where
    unknown); only the GPUs that hold the model's weights are consulted. ``cache`` is the KV
    cache class (``pytorch.cache_implementation``); a static cache is preallocated for prompt +
    ``max_new_tokens`` and read whole.
    """
    if shape is None:
        return _without_shape()
    reasons: dict[str, str] = {}
    flops = _flops(shape, batches, reasons)
    why, bandwidth = _bandwidth_problem(shape, cache, device, bandwidths)
    decode_s, _ = decode_time_and_steps(batches)
    if why is None and decode_s <= 0:
        why = "no decode steps were timed (every request ended at its first token)"
    util = per_s = None
    w_bytes = kv_bytes = None
    if why is None and bandwidth is not None:
        static = cache is CacheImplementation.static
        w_bytes, kv_bytes = _decode_traffic(shape, batches, max_new_tokens if static else None)
        per_s = (w_bytes + kv_bytes) / decode_s
        util = per_s / bandwidth
    else:
        for key in DECODE_TRAFFIC:
            reasons[f"compute.{key}"] = why or "memory bandwidth unknown"
    if bandwidth is None:
        reasons["compute.memory_bandwidth_bytes_per_s"] = why or "memory bandwidth unknown"
    return ComputeFigures(
        flops_estimate=flops,
        parameters=shape.n_parameters,
        matmul_parameters=shape.matmul_parameters,
        decode_bandwidth_utilisation=util,
        decode_bytes_per_s=per_s,
        decode_weight_bytes=w_bytes,
        decode_kv_bytes=kv_bytes,
        bandwidth_bytes_per_s=bandwidth,
        null_reasons=reasons,
    )


def _without_shape() -> ComputeFigures:
    keys = ("flops_estimate", *DECODE_TRAFFIC, "memory_bandwidth_bytes_per_s")
    reasons = {f"compute.{k}": UNKNOWN_SHAPE for k in keys}
    return ComputeFigures(
        flops_estimate=None,
        parameters=0,
        matmul_parameters=0,
        decode_bandwidth_utilisation=None,
        decode_bytes_per_s=None,
        decode_weight_bytes=None,
        decode_kv_bytes=None,
        bandwidth_bytes_per_s=None,
        null_reasons=reasons,
    )


def _flops(
    shape: ModelShape, batches: Sequence[BatchOutput], reasons: dict[str, str]
) -> float | None:
    """2 x N_matmul x num_beams x tokens; None (with its reason) for a mixture of experts."""
    if shape.moe:
        reasons["compute.flops_estimate"] = (
            "mixture-of-experts model: each token runs only its routed experts, so 2 x all "
            "parameters would overstate the work"
        )
        return None
    tokens = sum(_beams(b) * (sum(b.input_tokens) + sum(b.output_tokens)) for b in batches)
    return float(2 * shape.matmul_parameters * tokens)


def _decode_traffic(
    shape: ModelShape, batches: Sequence[BatchOutput], static_new_tokens: int | None
) -> tuple[int, int]:
    """(weight bytes, KV bytes) over every batch's decode steps; ``static_new_tokens`` set: a
    static cache of prompt width + that many positions, read whole at every step."""
    w_bytes, kv_bytes = 0, 0
    for b in batches:
        static_len = None
        if static_new_tokens is not None:
            static_len = max(b.input_tokens, default=0) + static_new_tokens
        w, k = decode_bytes(shape, b, static_len)
        w_bytes, kv_bytes = w_bytes + w, kv_bytes + k
    return w_bytes, kv_bytes


def _bandwidth_problem(
    shape: ModelShape,
    cache: CacheImplementation | None,
    device: str,
    bandwidths: Mapping[int, float | None],
) -> tuple[str | None, float | None]:
    """(why the utilisation cannot be given, or None; the one-GPU bandwidth to divide by)."""
    if device == "cpu":  # torch's name for the CPU; any other device is a vendor's GPU
        return "needs a GPU's memory bandwidth (from NVML); this run is on the CPU", None
    if shape.moe:
        return (
            "mixture-of-experts model: a decode step reads only the routed experts' weights, "
            "which this estimate cannot know",
            None,
        )
    if shape.offloaded_to:
        where = "/".join(shape.offloaded_to)
        return (
            f"some weights are offloaded to {where} (device_map); they cross the host link, not "
            "GPU memory",
            None,
        )
    if cache is CacheImplementation.offloaded_static:
        return "the KV cache is offloaded to the CPU (cache_implementation=offloaded_static)", None
    if shape.kv is None:
        return "the KV-cache layout of this architecture is not known", None
    devices = shape.cuda_devices or tuple(bandwidths)
    known = {bandwidths.get(d) for d in devices}
    if not devices or None in known:
        missing = [f"cuda:{d}" for d in devices if bandwidths.get(d) is None]
        return f"memory bandwidth unknown for {', '.join(missing) or 'the GPU'}", None
    if len(known) > 1:
        return "the model spans GPUs with different memory bandwidths", None
    return None, float(next(iter(known)))  # type: ignore[arg-type]

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

from llem.backends.base import BatchOutput
from llem.config.schema import ExperimentConfig
from llem.latency import decode_time_and_steps

MOE_CONFIG_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


@dataclass(frozen=True)
class KvLayout:
    """How large the KV cache is per position: per layer, and each layer's sliding window."""

    bytes_per_position_per_layer: int
    layer_windows: tuple[int | None, ...]  # one per layer; None = full attention

    def bytes_read(self, context: int) -> int:
        """Bytes of K and V one sequence reads at a step whose attention spans ``context``."""
        positions = sum(context if w is None else min(context, w) for w in self.layer_windows)
        return self.bytes_per_position_per_layer * positions


@dataclass(frozen=True)
class ModelShape:
    """What the estimates need to know about a loaded model."""

    n_parameters: int  # real count: quantization packing undone; shared weights counted once
    n_input_embedding: int
    n_lm_head: int
    tied_lm_head: bool  # the LM head shares its weight with the input embedding
    weight_bytes: int  # stored bytes read per decode step (input embedding excluded)
    kv: KvLayout | None  # None: KV-cache layout unknown for this architecture
    moe: bool
    offloaded_to: tuple[str, ...] = ()  # "cpu"/"disk" when device_map put weights there
    cuda_devices: tuple[int, ...] = ()  # torch indices of the GPUs holding weights

    @property
    def matmul_parameters(self) -> int:
        """Parameters that take part in a matmul per token (N_matmul above)."""
        return (
            self.n_parameters
            - self.n_input_embedding
            + (self.n_lm_head if self.tied_lm_head else 0)
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


# --- describing a model --------------------------------------------------------------------------


def real_numel(param: Any) -> int:
    """Elements a weight had before quantization (bitsandbytes 4-bit packs several per element)."""
    state = getattr(param, "quant_state", None)
    shape = getattr(state, "shape", None)
    if shape is not None:
        n = 1
        for s in shape:
            n *= int(s)
        return n
    if type(param).__name__ == "Params4bit":  # not yet quantized state: 2 weights per byte
        return int(param.numel()) * 2 * int(param.element_size())
    return int(param.numel())


def _stored_bytes(param: Any) -> int:
    return int(param.numel()) * int(param.element_size())


def kv_layout(config: Any, element_bytes: int) -> KvLayout | None:
    """KV bytes per position from a transformers config; None for layouts this does not know."""
    get_text = getattr(config, "get_text_config", None)
    cfg = get_text() if callable(get_text) else config
    layers = getattr(cfg, "num_hidden_layers", None)
    heads = getattr(cfg, "num_attention_heads", None)
    if not isinstance(layers, int) or not isinstance(heads, int) or heads < 1:
        return None
    if getattr(cfg, "kv_lora_rank", None):  # multi-head latent attention: compressed cache
        return None
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or getattr(cfg, "hidden_size", 0) // heads
    if not head_dim:
        return None
    window = getattr(cfg, "sliding_window", None)
    window = window if isinstance(window, int) and window > 0 else None
    types = getattr(cfg, "layer_types", None)
    if isinstance(types, (list, tuple)) and len(types) == layers:
        windows = tuple(window if "sliding" in str(t) else None for t in types)
    elif window is not None and getattr(cfg, "use_sliding_window", True) is not False:
        windows = (window,) * layers
    else:
        windows = (None,) * layers
    return KvLayout(2 * int(kv_heads) * int(head_dim) * element_bytes, windows)


def is_moe(config: Any) -> bool:
    get_text = getattr(config, "get_text_config", None)
    cfg = get_text() if callable(get_text) else config
    return any(
        isinstance(getattr(cfg, k, None), int) and getattr(cfg, k) > 1 for k in MOE_CONFIG_KEYS
    )


def model_shape(model: Any) -> ModelShape:
    """Describe a loaded transformers model (weights counted once each, even when shared)."""
    params = {id(p): p for p in model.parameters()}
    emb = model.get_input_embeddings()
    head = model.get_output_embeddings()
    emb_ids = {id(p) for p in emb.parameters()} if emb is not None else set()
    head_params = list(head.parameters()) if head is not None else []
    tied = any(id(p) in emb_ids for p in head_params)
    weight_bytes = sum(_stored_bytes(p) for i, p in params.items() if i not in emb_ids)
    if tied:
        weight_bytes += sum(_stored_bytes(p) for p in head_params)
    device_map = getattr(model, "hf_device_map", None) or {}
    placements = {str(v) for v in device_map.values()}
    offloaded = tuple(sorted(placements & {"cpu", "disk", "meta"}))
    cuda = sorted({p.device.index or 0 for p in params.values() if p.device.type == "cuda"})
    element_bytes = int(getattr(model.dtype, "itemsize", 0)) or 2
    return ModelShape(
        n_parameters=sum(real_numel(p) for p in params.values()),
        n_input_embedding=sum(real_numel(p) for p in params.values() if id(p) in emb_ids),
        n_lm_head=sum(real_numel(p) for p in head_params),
        tied_lm_head=tied,
        weight_bytes=weight_bytes,
        kv=kv_layout(model.config, element_bytes),
        moe=is_moe(model.config),
        offloaded_to=offloaded,
        cuda_devices=tuple(cuda),
    )


# --- the figures ---------------------------------------------------------------------------------


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
    exp: ExperimentConfig,
    device: str,
    bandwidths: Mapping[int, float | None],
) -> ComputeFigures:
    """FLOPs and decode bandwidth utilisation of the measured batches.

    ``bandwidths`` maps torch CUDA device indices to their memory bandwidth in bytes/s (None where
    unknown); only the GPUs that hold the model's weights are consulted.
    """
    reasons: dict[str, str] = {}
    if shape is None:
        unknown = "this backend does not describe its model's shape"
        return ComputeFigures(
            None,
            0,
            0,
            None,
            None,
            None,
            None,
            None,
            {"compute.flops_estimate": unknown, "compute.decode_bandwidth_utilisation": unknown},
        )
    n = shape.matmul_parameters
    flops: float | None = None
    if shape.moe:
        reasons["compute.flops_estimate"] = (
            "mixture-of-experts model: each token runs only its routed experts, so 2 x all "
            "parameters would overstate the work"
        )
    else:
        tokens = sum(_beams(b) * (sum(b.input_tokens) + sum(b.output_tokens)) for b in batches)
        flops = float(2 * n * tokens)

    why, bandwidth = _bandwidth_problem(shape, exp, device, bandwidths)
    decode_s, _ = decode_time_and_steps(batches)
    if why is None and decode_s <= 0:
        why = "no decode steps were timed (every request ended at its first token)"
    util = per_s = None
    w_bytes = kv_bytes = None
    if why is None and bandwidth is not None:
        cache = exp.pytorch.cache_implementation
        static = cache is not None and cache.value == "static"
        w_bytes, kv_bytes = 0, 0
        for b in batches:
            # A static cache is preallocated for prompt + max_new_tokens and read whole.
            static_len = max(b.input_tokens, default=0) + exp.decoder.max_new_tokens
            w, k = decode_bytes(shape, b, static_len if static else None)
            w_bytes, kv_bytes = w_bytes + w, kv_bytes + k
        per_s = (w_bytes + kv_bytes) / decode_s
        util = per_s / bandwidth
    else:
        reasons["compute.decode_bandwidth_utilisation"] = why or "memory bandwidth unknown"
    return ComputeFigures(
        flops_estimate=flops,
        parameters=shape.n_parameters,
        matmul_parameters=n,
        decode_bandwidth_utilisation=util,
        decode_bytes_per_s=per_s,
        decode_weight_bytes=w_bytes,
        decode_kv_bytes=kv_bytes,
        bandwidth_bytes_per_s=bandwidth,
        null_reasons=reasons,
    )


def _bandwidth_problem(
    shape: ModelShape, exp: ExperimentConfig, device: str, bandwidths: Mapping[int, float | None]
) -> tuple[str | None, float | None]:
    """(why the utilisation cannot be given, or None; the one-GPU bandwidth to divide by)."""
    if device != "cuda":
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
    cache = exp.pytorch.cache_implementation
    if cache is not None and cache.value == "offloaded_static":
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

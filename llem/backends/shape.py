"""Describing a loaded transformers model for the compute estimates: parameters, weight bytes,
KV-cache layout, mixture of experts, offloading and the GPUs holding it (a ``ModelShape``)."""

from __future__ import annotations

from typing import Any

from llem.backends.types import KvLayout, ModelShape

MOE_CONFIG_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


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

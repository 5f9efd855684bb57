"""Describing a loaded transformers model for the compute estimates: parameters, weight bytes,
KV-cache layout, mixture of experts, offloading and the GPUs holding it (a ``ModelShape``).

Parameters are counted as before quantization: bitsandbytes 4-bit and AWQ/GPTQ (int32 ``qweight``
tensors, ``32 / bits`` weights each) are unpacked; weight bytes are the stored bytes.
"""

from __future__ import annotations

from typing import Any

from llem.vocabulary.model import KvLayout, ModelShape

MOE_CONFIG_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


#: Tensors of an AWQ/GPTQ layer besides its packed weight (``qweight``): zero points, scales and
#: the act-order index. Stored and read each step, but not parameters of the original model.
PACKED_METADATA = ("qzeros", "scales", "g_idx")
PACKED_METHODS = ("awq", "gptq")


def packed_weights_per_element(quantization_config: Any) -> int | None:
    """Weights packed into one stored element of an AWQ/GPTQ ``qweight`` (int32: 32 / bits, 8
    for 4-bit), from the checkpoint's quantization config (a dict, as in ``config.json``, or a
    transformers config object); None for other (or no) quantization."""
    if quantization_config is None:
        return None
    if not isinstance(quantization_config, dict):
        to_dict = getattr(quantization_config, "to_dict", None)
        quantization_config = to_dict() if callable(to_dict) else vars(quantization_config)
    method = quantization_config.get("quant_method", "")
    method = str(getattr(method, "value", method)).lower()  # transformers' QuantizationMethod
    bits = quantization_config.get("bits") or quantization_config.get("w_bit")
    if not method.startswith(PACKED_METHODS) or not isinstance(bits, int) or bits < 1:
        return None
    return 32 // bits


def packed_role(name: str, pack: int | None) -> str | None:
    """``"qweight"`` or ``"metadata"`` for the tensors of an AWQ/GPTQ layer (``pack``: see
    ``packed_weights_per_element``); None for an ordinary tensor."""
    if pack is None:
        return None
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "qweight":
        return "qweight"
    return "metadata" if leaf in PACKED_METADATA else None


def real_numel(param: Any, name: str = "", pack: int | None = None) -> int:
    """Elements a weight had before quantization: bitsandbytes 4-bit packs several per element;
    an AWQ/GPTQ ``qweight`` packs ``pack`` per int32, and its zero points, scales and index are
    not parameters of the model."""
    role = packed_role(name, pack)
    if role == "qweight":
        return int(param.numel()) * int(pack or 1)
    if role == "metadata":
        return 0
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


def _weights(model: Any, pack: int | None) -> tuple[dict[int, Any], dict[int, str]]:
    """The model's parameters, plus its AWQ/GPTQ tensors where a kernel keeps them as buffers,
    each once (by id), with their names."""
    named = list(model.named_parameters())
    if pack is not None:
        named += [(n, b) for n, b in model.named_buffers() if packed_role(n, pack)]
    return {id(p): p for _, p in named}, {id(p): n for n, p in named}


def model_shape(model: Any) -> ModelShape:
    """Describe a loaded transformers model (weights counted once each, even when shared)."""
    pack = packed_weights_per_element(getattr(model.config, "quantization_config", None))
    params, names = _weights(model, pack)
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
        n_parameters=sum(real_numel(p, names[i], pack) for i, p in params.items()),
        n_input_embedding=sum(real_numel(p) for p in params.values() if id(p) in emb_ids),
        n_lm_head=sum(real_numel(p) for p in head_params),
        tied_lm_head=tied,
        weight_bytes=weight_bytes,
        kv=kv_layout(model.config, element_bytes),
        moe=is_moe(model.config),
        offloaded_to=offloaded,
        cuda_devices=tuple(cuda),
    )

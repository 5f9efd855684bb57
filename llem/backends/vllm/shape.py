"""A vLLM model's shape for the compute estimates, from the checkpoint's safetensors headers
(AWQ/GPTQ packed weights unpacked with the bits of the checkpoint's quantization config)."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llem.backends.shape import packed_role, packed_weights_per_element
from llem.vocabulary.model import ModelShape


def _safetensors_shapes(directory: Path) -> list[tuple[str, str, list[int]]]:
    """(name, dtype, shape) of every tensor in the directory's safetensors files (headers only)."""
    out: list[tuple[str, str, list[int]]] = []
    for f in sorted(directory.glob("*.safetensors")):
        with open(f, "rb") as fh:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(size))
        for name, info in header.items():
            if name != "__metadata__":
                out.append((name, info["dtype"], list(info["shape"])))
    return out


def _local_dir(source: str) -> Path | None:
    if Path(source).is_dir():
        return Path(source)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source, local_files_only=True))
    except Exception:
        return None


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for s in shape:
        out *= int(s)
    return out


#: Bytes per element of the safetensors dtypes that packed quantized tensors use.
SAFETENSORS_BYTES = {"I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "F16": 2, "BF16": 2, "F32": 4}


def checkpoint_sizes(
    source: str, vocab_size: int | None, bytes_per_element: int, pack: int | None = None
) -> tuple[int | None, int, int | None]:
    """(parameters, input-embedding parameters, weight bytes read per decode step) from the
    checkpoint's safetensors headers, the weights counted at the engine's dtype. With ``pack``
    (AWQ/GPTQ: weights per int32, ``packed_weights_per_element``) a ``qweight`` counts ``pack``
    parameters per element and its zero points, scales and index none; these tensors count their
    stored bytes. ``(None, 0, None)`` when no safetensors file is found."""
    directory = _local_dir(source)
    tensors = _safetensors_shapes(directory) if directory else []
    if not tensors:
        return None, 0, None
    params: dict[str, int] = {}
    stored: dict[str, int] = {}
    for name, dtype, shape in tensors:
        n, role = _prod(shape), packed_role(name, pack)
        params[name] = n * pack if role == "qweight" and pack else (0 if role else n)
        stored[name] = n * (SAFETENSORS_BYTES.get(dtype, 4) if role else bytes_per_element)
    emb = [
        n
        for n, _, shape in tensors
        if "embed" in n and shape and (vocab_size is None or shape[0] == vocab_size)
    ]
    emb_bytes = sum(stored[n] for n in emb)
    has_head = any("lm_head" in n for n in params)
    # a tied head reads the embedding matrix
    decode = sum(stored.values()) - emb_bytes + (0 if has_head else emb_bytes)
    return sum(params.values()), sum(params[n] for n in emb), decode


def engine_shape(source: str, model_config: Any) -> ModelShape | None:
    """What llem.figures.compute needs, from the checkpoint's own tensors at the engine's dtype
    (None when they are unknown). The KV layout is left unknown: vLLM pages its cache, so decode
    bandwidth stays null."""
    import torch

    hf_config = model_config.hf_config
    element = torch.tensor([], dtype=model_config.dtype).element_size()
    pack = packed_weights_per_element(getattr(hf_config, "quantization_config", None))
    n_params, n_emb, weight_bytes = checkpoint_sizes(
        source, getattr(hf_config, "vocab_size", None), element, pack
    )
    if n_params is None or weight_bytes is None:
        return None
    tied = bool(getattr(hf_config, "tie_word_embeddings", False))
    return ModelShape(
        n_parameters=n_params,
        n_input_embedding=n_emb,
        n_lm_head=n_emb if tied else 0,
        tied_lm_head=tied,
        weight_bytes=weight_bytes,
        kv=None,
        moe=bool(
            getattr(hf_config, "num_experts", None) or getattr(hf_config, "num_local_experts", None)
        ),
    )

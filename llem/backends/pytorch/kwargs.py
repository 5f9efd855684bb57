"""What the PyTorch backend hands to transformers: ``from_pretrained`` and ``generate`` keyword
arguments, and the out-of-memory error with its fixes.

A ``None`` knob is not passed, and ``passthrough_kwargs`` are merged last (they win). Greedy
decoding drops the sampling knobs instead of passing them.
"""

from __future__ import annotations

from typing import Any

from llem.backends import sections
from llem.backends.pytorch.quiet import BNB_MATMUL_LOGGER, say_once
from llem.config.model import Dtype
from llem.config.pytorch import PyTorchConfig
from llem.config.schema import ExperimentConfig
from llem.errors import OutOfMemory, first_line
from llem.vocabulary.engine import BackendSections

SAMPLING_KNOBS = ("temperature", "top_k", "top_p", "min_p")

Sections = BackendSections[PyTorchConfig]


def _sections(s: Sections | ExperimentConfig) -> Sections:
    """Scripts may pass a whole ``ExperimentConfig``; the backend passes its own sections."""
    return sections(s, "pytorch") if isinstance(s, ExperimentConfig) else s


def torch_dtype(dtype: Dtype | None) -> Any:
    if dtype is None:
        return None
    if dtype == Dtype.auto:
        return "auto"
    import torch

    return getattr(torch, dtype.value)


def _max_memory(value: dict[Any, str] | None) -> dict[Any, str] | None:
    if value is None:
        return None
    out: dict[Any, str] = {}
    for key, limit in value.items():
        k = str(key)
        out[int(k) if k.isdigit() else k] = str(limit)
    return out


def build_quantization_config(s: Sections) -> Any:
    q = s.quantization
    if not (q.load_in_4bit or q.load_in_8bit):
        return None
    from transformers import BitsAndBytesConfig

    if q.load_in_8bit:
        say_once(
            BNB_MATMUL_LOGGER
        )  # else a line per matmul on the CPU (llem.backends.pytorch.quiet)
    kwargs: dict[str, Any] = {"load_in_4bit": q.load_in_4bit, "load_in_8bit": q.load_in_8bit}
    if q.bnb_4bit_compute_dtype is not None:
        kwargs["bnb_4bit_compute_dtype"] = torch_dtype(q.bnb_4bit_compute_dtype)
    if q.bnb_4bit_quant_type is not None:
        kwargs["bnb_4bit_quant_type"] = q.bnb_4bit_quant_type.value
    if q.bnb_4bit_use_double_quant is not None:
        kwargs["bnb_4bit_use_double_quant"] = q.bnb_4bit_use_double_quant
    return BitsAndBytesConfig(**kwargs)


def build_load_kwargs(settings: Sections | ExperimentConfig, device: str) -> dict[str, Any]:
    """Keyword arguments for ``AutoModelForCausalLM.from_pretrained`` (model path excluded)."""
    s = _sections(settings)
    m, pt = s.model, s.engine
    kwargs: dict[str, Any] = {"trust_remote_code": m.trust_remote_code}
    optional = {
        "gguf_file": m.gguf_file,
        "revision": m.revision,
        "dtype": torch_dtype(m.dtype),
        "device_map": pt.device_map,
        "max_memory": _max_memory(pt.max_memory),
        "attn_implementation": pt.attn_implementation.value if pt.attn_implementation else None,
        "quantization_config": build_quantization_config(s),
    }
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    if device == "cuda" and "device_map" not in kwargs:
        kwargs["device_map"] = "cuda"
    kwargs.update(s.passthrough_kwargs)
    return kwargs


def build_generate_kwargs(settings: Sections | ExperimentConfig) -> dict[str, Any]:
    """Keyword arguments for ``model.generate`` (inputs, streamer and pad token excluded)."""
    s = _sections(settings)
    d, pt = s.decoder, s.engine
    knobs: dict[str, Any] = {
        "max_new_tokens": d.max_new_tokens,
        "min_new_tokens": d.min_new_tokens,
        "do_sample": d.do_sample,
        "repetition_penalty": d.repetition_penalty,
        "use_cache": pt.use_cache,
        "cache_implementation": pt.cache_implementation.value if pt.cache_implementation else None,
        "num_beams": pt.num_beams,
        "early_stopping": pt.early_stopping,
        "length_penalty": pt.length_penalty,
        "no_repeat_ngram_size": pt.no_repeat_ngram_size,
    }
    if d.do_sample:
        knobs.update({k: getattr(d, k) for k in SAMPLING_KNOBS})
    return {k: v for k, v in knobs.items() if v is not None}


def is_oom(exc: BaseException) -> bool:
    import torch

    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def oom_error(s: Sections, where: str, exc: BaseException) -> OutOfMemory:
    fixes = [f"a smaller pytorch.batch_size (now {s.engine.batch_size})"]
    if not (s.quantization.load_in_4bit or s.quantization.load_in_8bit):
        fixes.append("quantization=bnb-4bit or quantization=bnb-8bit")
    fixes.append("a cap such as pytorch.max_memory={0:20GiB,cpu:64GiB}")
    if where == "generate":
        fixes.append(f"fewer decoder.max_new_tokens (now {s.decoder.max_new_tokens})")
    first = first_line(exc)
    return OutOfMemory(f"out of memory during {where}: {first}", hint="try " + "; or ".join(fixes))

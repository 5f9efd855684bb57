"""The ``vllm:`` config group and its cross-field rules.

Every knob defaults to ``None`` (vLLM's own default applies and nothing is passed). Knob names are
vLLM's engine-argument names, so a value means what vLLM's documentation says it means;
``engine_kwargs`` passes any other engine argument and is merged last. ``vllm_problems(exp)`` lists
what the vllm backend cannot honour (pytorch-only knobs, bitsandbytes via ``quantization=``) and
out-of-range values, each naming its keys and the vLLM equivalent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:  # pragma: no cover
    from llem.config.schema import ExperimentConfig

BACKEND = "vllm"


@dataclass
class VLLMConfig:
    max_num_seqs: Optional[int] = None  # sequences decoded together (the batch knob)
    max_model_len: Optional[int] = None
    # GPU: fraction of GPU memory for weights + KV cache. CPU: fraction of host memory (llem's
    # default there is CPU_MEMORY_UTILIZATION in llem/backends/vllm.py).
    gpu_memory_utilization: Optional[float] = None
    kv_cache_memory_bytes: Optional[int] = None  # an explicit KV cache size (wins over the above)
    tensor_parallel_size: Optional[int] = None
    pipeline_parallel_size: Optional[int] = None
    quantization: Optional[str] = None  # vLLM's method names: awq, gptq, fp8, bitsandbytes, ...
    kv_cache_dtype: Optional[str] = None  # auto, fp8, fp8_e4m3, fp8_e5m2, ...
    enforce_eager: Optional[bool] = None
    enable_prefix_caching: Optional[bool] = None
    enable_chunked_prefill: Optional[bool] = None
    max_num_batched_tokens: Optional[int] = None
    block_size: Optional[int] = None
    swap_space: Optional[float] = None  # GiB; vLLM versions without it reject it at pre-flight
    seed: Optional[int] = None  # engine seed; None: llem's top-level seed
    engine_kwargs: Dict[str, Any] = field(default_factory=dict)  # any engine argument, merged last


# pytorch.* knob -> what to use with the vllm backend instead
_PYTORCH_EQUIVALENT = {
    "batch_size": "vllm.max_num_seqs; all prompts go to the engine at once",
    "device_map": "vllm.tensor_parallel_size / vllm.pipeline_parallel_size",
    "max_memory": "vllm.gpu_memory_utilization or vllm.kv_cache_memory_bytes",
    "attn_implementation": "+vllm.engine_kwargs.attention_config.backend=NAME; "
    "vLLM picks one itself",
    "torch_compile": "vllm.enforce_eager; vLLM compiles unless it is true",
    "torch_compile_mode": "vllm.enforce_eager; vLLM compiles unless it is true",
    "torch_compile_backend": "vllm.enforce_eager; vLLM compiles unless it is true",
    "use_cache": "vllm.block_size and vllm.kv_cache_dtype; vLLM always uses its paged KV cache",
    "cache_implementation": "vllm.block_size and vllm.kv_cache_dtype; vLLM always uses its "
    "paged KV cache",
    "num_beams": "none; beam search is not measured through the vllm backend",
    "early_stopping": "none; beam search is not measured through the vllm backend",
    "length_penalty": "none; beam search is not measured through the vllm backend",
    "no_repeat_ngram_size": "none in vLLM",
    "prompt_lookup_num_tokens": "+vllm.engine_kwargs.speculative_config with method ngram",
    "num_threads": "the VLLM_CPU_OMP_THREADS_BIND environment variable on the CPU",
}


def _show(value: Any) -> str:
    if hasattr(value, "value"):  # Enum
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _range_problems(v: VLLMConfig) -> List[str]:
    p: List[str] = []
    u = v.gpu_memory_utilization
    if u is not None and not 0.0 < u <= 1.0:
        p.append(
            f"vllm.gpu_memory_utilization={u} is out of range (allowed: greater than 0, at most 1; "
            "on the CPU it is a fraction of host memory)"
        )
    for name in (
        "max_num_seqs",
        "max_model_len",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "max_num_batched_tokens",
        "block_size",
        "kv_cache_memory_bytes",
    ):
        value = getattr(v, name)
        if value is not None and value < 1:
            p.append(f"vllm.{name}={value} is out of range (allowed: >= 1)")
    for name in ("swap_space", "seed"):
        value = getattr(v, name)
        if value is not None and value < 0:
            p.append(f"vllm.{name}={value} is out of range (allowed: >= 0)")
    return p


def vllm_problems(exp: ExperimentConfig) -> List[str]:
    """Every rule about the vllm backend that ``exp`` breaks (empty when none)."""
    from llem.config.schema import PyTorchConfig

    v = exp.vllm
    p = _range_problems(v)
    set_vllm = [f.name for f in fields(VLLMConfig) if getattr(v, f.name) not in (None, {})]
    if exp.backend != BACKEND:
        for name in set_vllm:
            p.append(
                f"vllm.{name}={_show(getattr(v, name))} needs +backend=vllm "
                f"(the backend is {exp.backend or 'the default, pytorch'})"
            )
        return p

    defaults = PyTorchConfig()
    for name, instead in _PYTORCH_EQUIVALENT.items():
        value = getattr(exp.pytorch, name)
        if value != getattr(defaults, name):
            p.append(
                f"pytorch.{name}={_show(value)} does not apply to backend=vllm "
                f"(vLLM equivalent: {instead})"
            )
    q = exp.quantization
    if q.load_in_4bit or q.load_in_8bit:
        which = "bnb-4bit" if q.load_in_4bit else "bnb-8bit"
        p.append(
            f"quantization={which} is the transformers bitsandbytes path and does not apply to "
            "backend=vllm (use quantization=none vllm.quantization=bitsandbytes)"
        )
    if exp.passthrough_kwargs:
        keys = ", ".join(sorted(str(k) for k in exp.passthrough_kwargs))
        p.append(
            f"passthrough_kwargs ({keys}) are from_pretrained arguments and do not apply to "
            "backend=vllm (use +vllm.engine_kwargs.<engine argument>=VALUE)"
        )
    return p

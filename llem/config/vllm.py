"""The ``vllm:`` config group and its cross-field rules.

Every knob defaults to ``None`` (vLLM's own default applies and nothing is passed). Knob names are
vLLM's engine-argument names, so a value means what vLLM's documentation says it means;
``engine_kwargs`` passes any other engine argument and is merged last. ``vllm_problems(exp)`` lists
what the vllm backend cannot honour (pytorch-only knobs, bitsandbytes via ``quantization=``) and
out-of-range values, each naming its keys and the vLLM equivalent.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from llem.config.knobs import Destination, knob

if TYPE_CHECKING:  # pragma: no cover
    from llem.config.schema import ExperimentConfig

BACKEND = "vllm"


ENGINE = Destination(
    "vllm engine",
    "an argument of vLLM's engine (`vllm.LLM(...)`); vLLM's own default applies when null",
)


@dataclass
class VLLMConfig:
    max_num_seqs: int | None = knob(
        None, doc="Sequences decoded together: the batch knob of vLLM.", goes_to=ENGINE, ge=1
    )
    max_model_len: int | None = knob(
        None, doc="Longest prompt + output the engine plans for.", goes_to=ENGINE, ge=1
    )
    gpu_memory_utilization: float | None = knob(
        None,
        doc="GPU: fraction of GPU memory for weights and KV cache. CPU: fraction of host memory "
        "(llem uses 0.2 on the CPU when unset).",
        goes_to=ENGINE,
        gt=0,
        le=1,
    )
    kv_cache_memory_bytes: int | None = knob(
        None, doc="An explicit KV cache size (wins over the fraction).", goes_to=ENGINE, ge=1
    )
    tensor_parallel_size: int | None = knob(
        None, doc="GPUs a layer is split across.", goes_to=ENGINE, ge=1
    )
    pipeline_parallel_size: int | None = knob(
        None, doc="GPUs the layers are staged across.", goes_to=ENGINE, ge=1
    )
    quantization: str | None = knob(
        None, doc="vLLM's method: awq, gptq, fp8, bitsandbytes, gguf, ...", goes_to=ENGINE
    )
    kv_cache_dtype: str | None = knob(
        None, doc="KV cache element type: auto, fp8, fp8_e4m3, fp8_e5m2, ...", goes_to=ENGINE
    )
    enforce_eager: bool | None = knob(
        None, doc="Skip CUDA graphs and compilation (faster start, slower steps).", goes_to=ENGINE
    )
    enable_prefix_caching: bool | None = knob(
        None, doc="Reuse KV blocks of shared prompt prefixes.", goes_to=ENGINE
    )
    enable_chunked_prefill: bool | None = knob(
        None, doc="Split long prefills into chunks scheduled with decodes.", goes_to=ENGINE
    )
    max_num_batched_tokens: int | None = knob(
        None, doc="Tokens the scheduler batches into one step.", goes_to=ENGINE, ge=1
    )
    block_size: int | None = knob(
        None, doc="Tokens per paged KV-cache block.", goes_to=ENGINE, ge=1
    )
    swap_space: float | None = knob(
        None,
        doc="CPU swap space in GiB (vLLM versions without it reject it at pre-flight).",
        goes_to=ENGINE,
        ge=0,
    )
    seed: int | None = knob(
        None, doc="Engine seed; null uses llem's top-level seed.", goes_to=ENGINE, ge=0
    )
    engine_kwargs: dict[str, Any] = knob(
        factory=dict, doc="Any other engine argument, merged last.", goes_to=ENGINE
    )


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


def vllm_problems(exp: ExperimentConfig) -> list[str]:
    """Every rule about the vllm backend that ``exp`` breaks (empty when none)."""
    from llem.config.schema import PyTorchConfig

    v = exp.vllm
    p: list[str] = []  # ranges are declared with the fields (llem.config.knobs)
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

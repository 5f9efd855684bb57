"""The ``vllm:`` group: the vLLM backend's own section.

Every knob defaults to ``None`` (vLLM's own default applies and nothing is passed). Knob names are
vLLM's engine-argument names, so a value means what vLLM's documentation says it means;
``engine_kwargs`` passes any other engine argument and is merged last. The rules between this
section and the rest of the tree live in ``llem.config.engines``; ``VLLM_INSTEAD`` is what
the vLLM engine's row says to use instead of PyTorch's keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llem.config.knobs import LLEM, Destination, knob

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
        None,
        doc="Engine seed; null uses the run's seed (lifecycle.seed: seed + repeat when sampling).",
        goes_to=ENGINE,
        ge=0,
    )
    per_request_seed: bool | None = knob(
        None,
        doc="true: each sampling request carries the run's seed (SamplingParams.seed), so a "
        "repeat samples the same text however the engine batches it, on vLLM's slower "
        "sampling path (no FlashInfer top-k/top-p); null/false: only the engine is seeded.",
        goes_to=LLEM,
    )
    engine_kwargs: dict[str, Any] = knob(
        factory=dict, doc="Any other engine argument, merged last.", goes_to=ENGINE
    )


def vllm_equivalent(text: str) -> str:
    return f"vLLM equivalent: {text}"


COMPILE = vllm_equivalent("vllm.enforce_eager; vLLM compiles unless it is true")
PAGED = vllm_equivalent(
    "vllm.block_size and vllm.kv_cache_dtype; vLLM always uses its paged KV cache"
)
NO_BEAMS = vllm_equivalent("none; beam search is not measured through the vllm backend")

# pytorch.* knob -> what to use with the vllm backend instead
VLLM_INSTEAD = {
    "pytorch.batch_size": vllm_equivalent(
        "vllm.max_num_seqs; all prompts go to the engine at once"
    ),
    "pytorch.batching": "vLLM always batches continuously; leave it unset",
    "pytorch.device_map": vllm_equivalent(
        "vllm.tensor_parallel_size / vllm.pipeline_parallel_size"
    ),
    "pytorch.max_memory": vllm_equivalent(
        "vllm.gpu_memory_utilization or vllm.kv_cache_memory_bytes"
    ),
    "pytorch.attn_implementation": vllm_equivalent(
        "+vllm.engine_kwargs.attention_config.backend=NAME; vLLM picks one itself"
    ),
    "pytorch.torch_compile": COMPILE,
    "pytorch.torch_compile_mode": COMPILE,
    "pytorch.torch_compile_backend": COMPILE,
    "pytorch.use_cache": PAGED,
    "pytorch.cache_implementation": PAGED,
    "pytorch.num_beams": NO_BEAMS,
    "pytorch.early_stopping": NO_BEAMS,
    "pytorch.length_penalty": NO_BEAMS,
    "pytorch.no_repeat_ngram_size": vllm_equivalent("none in vLLM"),
    "pytorch.prompt_lookup_num_tokens": vllm_equivalent(
        "speculative=ngram speculative.num_tokens=N (vLLM's speculative_config)"
    ),
    "pytorch.num_threads": vllm_equivalent(
        "the VLLM_CPU_OMP_THREADS_BIND environment variable on the CPU"
    ),
}

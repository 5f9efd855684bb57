"""The engines llem knows, by name, and the rules that tie each engine to the rest of the tree.

Engine names and the Python package each needs live here, in the configuration layer, so that
validating a configuration never imports an engine (``llem.backends`` maps a name to its driver).
``engine_problems(exp)`` lists what the chosen engine cannot honour, each naming its keys.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from llem.config.pytorch import PyTorchConfig
from llem.config.schema import ExperimentConfig
from llem.config.vllm import VLLMConfig

PYTORCH = "pytorch"
VLLM = "vllm"

# engine name -> the package that must be importable for it to work (in detection order)
ENGINE_PACKAGES: dict[str, str] = {PYTORCH: "transformers", VLLM: "vllm"}

# package -> how to install it, for pre-flight messages
INSTALL_HINTS: dict[str, str] = {
    "vllm": "pip install 'llem[vllm]' on a GPU machine, or "
    "LLEM_VENV=.venv-vllm bash scripts/setup.sh --vllm on any machine",
}


def known_backends() -> list[str]:
    return sorted(ENGINE_PACKAGES)


def backend_package(name: str) -> str:
    return ENGINE_PACKAGES[name]


def engine_problems(exp: ExperimentConfig) -> list[str]:
    """Every rule between the engine and the rest of the configuration that ``exp`` breaks."""
    p = vllm_problems(exp)
    if exp.backend is not None and exp.backend not in ENGINE_PACKAGES:
        p.append(f"backend={exp.backend}: unknown backend (allowed: {', '.join(known_backends())})")
    return p


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
    v = exp.vllm
    p: list[str] = []  # ranges are declared with the fields (llem.config.knobs)
    set_vllm = [f.name for f in fields(VLLMConfig) if getattr(v, f.name) not in (None, {})]
    if exp.backend != VLLM:
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

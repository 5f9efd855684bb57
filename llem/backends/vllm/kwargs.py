"""What the vLLM backend hands to vLLM: engine arguments and ``SamplingParams`` keyword arguments.

``model.dtype`` and the ``vllm:`` knobs become engine arguments (``None`` knobs are not passed;
``vllm.engine_kwargs`` are merged last; the ``speculative`` group becomes ``speculative_config``,
``llem.backends.vllm.speculation``); the decoder group becomes ``SamplingParams`` (greedy:
temperature 0). Prefix caching is off unless the user turns it on (``vllm.enable_prefix_caching``
or ``engine_kwargs``), so the window measures cold prefill. Two CPU-aware defaults, used only when
the user set nothing: a host-memory fraction (``CPU_MEMORY_UTILIZATION``) and, on an x86 CPU
without native bfloat16, ``dtype=float32`` instead of vLLM's ``auto``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from llem.backends import random_weights
from llem.backends.gguf_cache import convert_gguf
from llem.backends.models import resolve_name_or_path
from llem.backends.vllm.speculation import engine_kwargs as speculative_kwargs
from llem.config.vllm import VLLMConfig
from llem.vocabulary.engine import BackendSections
from llem.vocabulary.workload import Prompt

Sections = BackendSections[VLLMConfig]

#: On the CPU, ``gpu_memory_utilization`` is the fraction of *host* memory vLLM reserves for
#: weights and KV cache. vLLM's default (0.92) fails on any machine where other processes hold more
#: than 8% of memory; llem passes this instead when neither vllm.gpu_memory_utilization nor
#: vllm.kv_cache_memory_bytes nor VLLM_CPU_KVCACHE_SPACE is set.
CPU_MEMORY_UTILIZATION = 0.2

ENGINE_KNOBS = (
    "max_num_seqs",
    "max_model_len",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "quantization",
    "kv_cache_dtype",
    "enforce_eager",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "block_size",
    "swap_space",
)


def quiet_vllm_logs() -> None:
    """vLLM logs every engine start at INFO from each of its processes; keep warnings only,
    unless the user chose a level (the spawned engine processes inherit the environment)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def _memory_set(v: VLLMConfig) -> bool:
    return (
        v.gpu_memory_utilization is not None
        or v.kv_cache_memory_bytes is not None
        or "gpu_memory_utilization" in v.engine_kwargs
        or "kv_cache_memory_bytes" in v.engine_kwargs
        or bool(os.environ.get("VLLM_CPU_KVCACHE_SPACE"))
    )


def cpu_lacks_bf16() -> bool:
    """True on an x86 CPU without native bfloat16 (no AVX512-BF16 or AMX), where vLLM's ``auto``
    dtype (bfloat16 for a float32 checkpoint) runs through slow fallback kernels."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" not in flags and "amx_bf16" not in flags


def build_engine_kwargs(s: Sections, device: str, source: str) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` (``source``: the checkpoint directory or hub id)."""
    v, m = s.engine, s.model
    kwargs: dict[str, Any] = {
        "model": source,
        "tokenizer": source,
        "trust_remote_code": m.trust_remote_code,
        "seed": v.seed if v.seed is not None else s.run_seed,
    }
    if m.dtype is not None:
        kwargs["dtype"] = m.dtype.value
    elif device == "cpu" and cpu_lacks_bf16():
        kwargs["dtype"] = "float32"
    if m.revision and not m.gguf_file and not random_weights.is_random(m):
        kwargs["revision"] = m.revision
    if random_weights.is_random(m):  # vLLM's own zero-mean init, no weights read
        kwargs["load_format"] = "dummy"
    for name in ENGINE_KNOBS:
        value = getattr(v, name)
        if value is not None:
            kwargs[name] = value
    if device == "cpu" and not _memory_set(v):
        kwargs["gpu_memory_utilization"] = CPU_MEMORY_UTILIZATION
    if v.enable_prefix_caching is None:
        # The warm-up runs the very prompts the window measures: with vLLM's default (on) nearly
        # every prefill in the window would be a cache hit. Cold prefill unless the user asks.
        kwargs["enable_prefix_caching"] = False
    kwargs.update(speculative_kwargs(s.speculative, draft_source(s)))
    kwargs.update(v.engine_kwargs)
    return kwargs


#: How the vLLM engine's sampling is seeded (recorded with the engine's arguments: the engine is
#: kept across runs that differ only in ``vllm.per_request_seed``, which each run's config holds).
SAMPLING_SEED = (
    "engine-level seed {seed} (vllm.seed, else the run's seed: seed + repeat when sampling), "
    "set once when the engine starts; requests carry no seed of their own unless "
    "vllm.per_request_seed=true, so vLLM draws every row's sampling noise from the one "
    "generator (no per-request generators) and a repeat samples the same text only where the "
    "engine batches its requests the same way"
)


def build_sampling_kwargs(s: Sections) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams``: greedy is temperature 0, and greedy decoding
    drops the sampling knobs (as the pytorch backend does). No request carries a ``seed`` unless
    ``vllm.per_request_seed=true``: in vLLM's sampler a per-request generator turns off the
    FlashInfer top-k/top-p kernels and adds work per seeded row and step, which a deployment
    without seeds does not pay. Repeats sample differently through the engine's own seed
    instead (``SAMPLING_SEED``)."""
    d = s.decoder
    kwargs: dict[str, Any] = {"max_tokens": d.max_new_tokens}
    if d.min_new_tokens is not None:
        kwargs["min_tokens"] = d.min_new_tokens
    if random_weights.is_random(s.model):  # every request runs to max_tokens
        kwargs["ignore_eos"] = True
    if d.repetition_penalty is not None:
        kwargs["repetition_penalty"] = d.repetition_penalty
    if not d.do_sample:
        kwargs["temperature"] = 0.0
        return kwargs
    kwargs["temperature"] = 1.0 if d.temperature is None else d.temperature
    if s.engine.per_request_seed:
        kwargs["seed"] = s.run_seed
    for name in ("top_p", "top_k", "min_p"):
        value = getattr(d, name)
        if value is not None:
            kwargs[name] = value
    return kwargs


def stop_kwargs(prompt: Prompt) -> dict[str, Any]:
    """``SamplingParams`` keyword arguments that stop a request at its prompt's stop strings
    (``Prompt.stop``; none when it has none). vLLM counts the token that completed the stop
    string among the request's output tokens; ``include_stop_str_in_output`` keeps the stop
    string in the text, as the other engines' texts hold it, and the judge cuts it there."""
    if not prompt.stop:
        return {}
    return {"stop": list(prompt.stop), "include_stop_str_in_output": True}


def request_sampling_kwargs(s: Sections, prompt: Prompt) -> dict[str, Any]:
    """One request's ``SamplingParams`` keyword arguments: the run's, with its stop strings."""
    return {**build_sampling_kwargs(s), **stop_kwargs(prompt)}


def model_label(s: Sections) -> str:
    m = s.model
    if random_weights.is_random(m):
        return random_weights.identity(m)
    return f"{m.name_or_path}|{m.gguf_file}" if m.gguf_file else m.name_or_path


def draft_source(s: Sections) -> str | None:
    """Where speculative=draft's draft model loads from (a local directory, or the Hub name as
    written); None without one."""
    name = s.speculative.draft_model
    return resolve_name_or_path(name)[0] if name else None


def checkpoint_source(s: Sections) -> str:
    """What vLLM loads: a local directory, a hub id, or llem's converted copy of a GGUF file."""
    m = s.model
    if random_weights.is_random(m):  # config.json and a tokenizer, no weights
        return str(random_weights.random_source(m).directory)
    path, _ = resolve_name_or_path(m.name_or_path)
    if not m.gguf_file:
        return path
    # vLLM 0.32 loads GGUF only through a plugin; llem's own conversion (shared with the pytorch
    # backend and cached in ~/.cache/llem) gives it an ordinary checkpoint instead.
    return str(convert_gguf(Path(path), m.gguf_file, m.trust_remote_code))

"""The vLLM backend, configured by the ``vllm:`` section (``llem.config.vllm``).

``kwargs`` builds the engine and sampling arguments, ``preflight`` checks what can be checked
before an engine starts, ``shape`` describes the checkpoint, ``engine`` drives the engine:
``offline`` steps ``vllm.LLM`` through a batch, ``serve`` hands ``AsyncLLM`` a workload.
Nothing here imports vllm, torch or transformers at module level: pre-flight and configuration
errors stay fast, and vLLM's spawned engine process can import llem safely.
"""

from __future__ import annotations

from llem.backends.vllm.core_process import VLLM_PROCESS_NOTE
from llem.backends.vllm.engine import EngineModel, VLLMBackend
from llem.backends.vllm.kwargs import (
    CPU_MEMORY_UTILIZATION,
    Sections,
    build_engine_kwargs,
    build_sampling_kwargs,
)
from llem.backends.vllm.preflight import preflight_problems
from llem.config.vllm import VLLMConfig
from llem.vocabulary.engine import Backend

__all__ = [
    "CPU_MEMORY_UTILIZATION",
    "VLLM_PROCESS_NOTE",
    "EngineModel",
    "VLLMBackend",
    "build_engine_kwargs",
    "build_sampling_kwargs",
    "create_backend",
    "preflight_problems",
]


def create_backend(sections: Sections) -> Backend[VLLMConfig]:
    return VLLMBackend(sections)

"""Memory figures are a value or null with the reason, never both: an engine in processes of its
own (vllm) is not stood in for by this process's allocator readings."""

from __future__ import annotations

import dataclasses

from llem.result import Figure, RunResult
from llem.runner.assemble import fill_memory
from llem.runner.torch_devices import model_gpu_indices
from llem.vocabulary.model import LoadedModel

# What this process's allocator reads while vLLM's engine holds the GPU: about nothing.
THIS_PROCESS = {
    "peak_allocated_mb": 0.1,
    "peak_reserved_mb": 2.0,
    "per_device": {"cuda:0": {"peak_allocated_mb": 0.1, "peak_reserved_mb": 2.0}},
}


def _loaded(engine_process: str | None) -> LoadedModel:
    return LoadedModel(
        model=None,
        tokenizer=None,
        device="cuda",
        dtype="float16",
        load_kwargs={},
        load_key="k",
        load_s=0.0,
        source="m",
        shape=None,
        engine_process=engine_process,
    )


def _value_and_reason(result: RunResult) -> list[str]:
    mem = dataclasses.asdict(result.memory)
    return [
        k for k, v in mem.items() if v not in (None, {}) and f"memory.{k}" in result.null_reasons
    ]


def test_an_engine_in_its_own_processes_gets_null_allocator_figures_with_the_reason() -> None:
    result = RunResult(status="ok")
    result.set_figure("memory.peak_device_used_mb", Figure(30_000.0))  # NVML: device-wide
    fill_memory(result, _loaded("the engine runs in its own processes"), "cuda", THIS_PROCESS)
    mem = result.memory
    assert mem.peak_allocated_mb is None and mem.peak_reserved_mb is None
    assert mem.peak_host_rss_mb is None and mem.per_device == {}
    assert result.null_reasons["memory.peak_allocated_mb"] == "the engine runs in its own processes"
    assert mem.peak_device_used_mb == 30_000.0
    assert "memory.peak_device_used_mb" not in result.null_reasons
    assert _value_and_reason(result) == []


def test_a_model_in_this_process_keeps_its_allocator_peaks_without_reasons() -> None:
    result = RunResult(status="ok")
    fill_memory(result, _loaded(None), "cuda", THIS_PROCESS)
    assert result.memory.peak_allocated_mb == 0.1
    assert result.memory.per_device == THIS_PROCESS["per_device"]
    assert "memory.peak_allocated_mb" not in result.null_reasons
    assert _value_and_reason(result) == []


def test_the_allocator_of_this_process_is_not_read_for_an_engine_elsewhere() -> None:
    assert model_gpu_indices(_loaded("the engine runs in its own processes")) == []

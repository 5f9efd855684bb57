"""A loaded model and what it says of itself: its shape (parameters, weight bytes, KV layout)
for the compute figures, the processes and GPUs its engine used, what compiles in it.

Imports nothing of llem's but the facts an engine hands the run; writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llem.vocabulary.facts import EngineFacts, LentGpus, WindowFacts


@dataclass(frozen=True)
class KvLayout:
    """How large the KV cache is per position: per layer, and each layer's sliding window."""

    bytes_per_position_per_layer: int
    layer_windows: tuple[int | None, ...]  # one per layer; None = full attention

    def bytes_read(self, context: int) -> int:
        """Bytes of K and V one sequence reads at a step whose attention spans ``context``."""
        positions = sum(context if w is None else min(context, w) for w in self.layer_windows)
        return self.bytes_per_position_per_layer * positions


@dataclass(frozen=True)
class ModelShape:
    """What the compute estimates (``llem.figures.compute``) need to know about a loaded model."""

    n_parameters: int  # real count: quantization packing undone; shared weights counted once
    n_input_embedding: int
    n_lm_head: int
    tied_lm_head: bool  # the LM head shares its weight with the input embedding
    weight_bytes: int  # stored bytes read per decode step (input embedding excluded)
    kv: KvLayout | None  # None: KV-cache layout unknown for this architecture
    moe: bool
    offloaded_to: tuple[str, ...] = ()  # "cpu"/"disk" when device_map put weights there
    cuda_devices: tuple[int, ...] = ()  # torch indices of the GPUs holding weights

    @property
    def matmul_parameters(self) -> int:
        """Parameters that take part in a matmul per token (parameters - input embedding + a
        tied LM head)."""
        return (
            self.n_parameters
            - self.n_input_embedding
            + (self.n_lm_head if self.tied_lm_head else 0)
        )


@dataclass(frozen=True)
class WorkloadProcesses:
    """Processes outside llem's own tree that do the run's work (a running server's): the
    other-processes check counts those ``owns`` says are the workload's as the run's own, and
    its sentence adds ``said`` (whose they are, and how they were found)."""

    owns: Callable[[int], bool]
    said: str


@dataclass(frozen=True)
class EngineGpus:
    """The GPUs the engine's processes held in the window (UUIDs; None with ``null_reason`` where
    they cannot be known), for the check that the run measured each of them
    (``llem.measure.engine_gpus``)."""

    uuids: list[str] | None
    null_reason: str | None = None
    cover: str = ""  # how to measure a GPU it used beyond those measured
    who: str = "the engine"  # how the check's sentences name it ("the server")


def shown(kwargs: dict[str, Any]) -> dict[str, Any]:
    """JSON-ready view of an engine's load kwargs (``LoadedModel.load_kwargs``): objects such as
    a BitsAndBytesConfig become their repr."""
    return {
        k: (v if isinstance(v, (str, int, float, bool, dict, list)) or v is None else repr(v))
        for k, v in kwargs.items()
    }


@dataclass
class LoadedModel:
    """A model ready to generate, plus what the run needs to describe it."""

    model: Any
    tokenizer: Any
    device: str  # "cuda" or "cpu"
    dtype: str
    load_kwargs: dict[str, Any]  # exactly what from_pretrained received (reprs for objects)
    load_key: str  # identical keys load identical models (used for reuse across a sweep)
    load_s: float
    source: str  # where the weights came from (path, or the GGUF conversion cache)
    shape: ModelShape | None  # parameters, weight bytes, KV layout, devices (None: unknown)
    # The engine runs in processes of its own (vllm): why this process's allocator and RSS do
    # not see its memory. None when the model lives in this process.
    engine_process: str | None = None
    # What torch.compile does in the measured window: "pending" (wrapped, not yet run), "active",
    # "failed: <error>", or None when it is off (read after ``Backend.warm_up``).
    torch_compile: str | None = None
    # Whether the engine reuses KV blocks of shared prompt prefixes (vllm); None: no such cache.
    prefix_caching: bool | None = None

    def engine_facts(self) -> EngineFacts:
        """What the engine says of itself once loaded (a section of its own, the server's, and
        the device it states), for the run to write into its result; nothing for an engine in
        this process."""
        return EngineFacts()

    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        """After the measured window: what the engine saw of it (a server's own /metrics, its
        processes on the GPUs, looked up through the run's library ``gpus`` where this host's
        ``measured`` GPUs are any; the speculation it counted), for the run to write and judge.
        Files of its own go into ``run_dir``. Nothing but speculation for an engine in this
        process."""
        return WindowFacts()

    def workload_processes(self) -> WorkloadProcesses | None:
        """The processes outside llem's tree that run this model (a running server's), for the
        other-processes check; None: the model runs in llem's own processes."""
        return None

    def compilations(self) -> int | None:
        """Compilations this process has run so far (a running count; the window's are the
        difference across it), or None when nothing compiles lazily here (torch.compile off)."""
        return None

    def forward_calls(self) -> tuple[int, int] | None:
        """(forward calls, those that ran eagerly although compiled: Dynamo's recompile limit)
        so far (running counts), or None when nothing is compiled here (torch.compile off)."""
        return None

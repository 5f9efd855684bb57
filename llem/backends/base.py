"""What a backend provides to a run, and what a generated batch reports back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from llem.config.schema import ExperimentConfig
from llem.prompts import Prompt

if TYPE_CHECKING:
    from llem.compute import ModelShape


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
    shape: ModelShape | None  # parameters, weight bytes, KV layout, devices (llem.compute)
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchOutput:
    """One generate() call: exact token counts and per-step timestamps (perf_counter seconds)."""

    start_s: float
    end_s: float
    input_tokens: list[int]  # real prompt tokens per request (no padding)
    output_tokens: list[int]  # generated tokens per request, up to and including the first EOS
    step_times_s: list[float]  # when each decoding step's tokens reached the host
    step_tokens: list[int]  # tokens added per request by each step (1, or more with prompt lookup)
    texts: list[str] | None = None  # decoded outputs (measurement.save_outputs=true only)
    num_beams: int = 1  # beams per request (every beam runs prefill and decode)
    # Engines that schedule each request on its own (continuous batching) report each request's
    # own timeline instead: when its tokens reached the host, and how many arrived each time.
    # When set, latency figures are computed from these, per request.
    request_step_times_s: list[list[float]] | None = None
    request_step_tokens: list[list[int]] | None = None


class Backend(Protocol):
    """Everything a run asks of an engine (llem.lifecycle and llem.sweep.reuse call only these)."""

    name: str

    def load_key(self, exp: ExperimentConfig, device: str) -> str:
        """Equal keys load equal models: the run reuses a loaded model across equal keys."""
        ...

    def torch_device_indices(self, exp: ExperimentConfig) -> list[int]:
        """The torch CUDA indices the model will be placed on (what a CUDA run measures)."""
        ...

    def batches(self, exp: ExperimentConfig, prompts: list[Prompt]) -> list[list[Prompt]]:
        """The prompt set cut the way this backend hands it to ``generate``."""
        ...

    def load(self, exp: ExperimentConfig, device: str) -> LoadedModel: ...

    def generate(
        self, loaded: LoadedModel, exp: ExperimentConfig, prompts: Sequence[Prompt]
    ) -> BatchOutput: ...

    def warm_up(
        self, loaded: LoadedModel, exp: ExperimentConfig, batches: Sequence[Sequence[Prompt]]
    ) -> dict[str, Any]:
        """Run ``measurement.warmup`` batches (and whatever first-use work, such as compilation,
        must stay out of the measured window); return what actually runs, for ``lifecycle``."""
        ...

    def unload(self, loaded: LoadedModel) -> None: ...

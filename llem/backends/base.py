"""What a backend provides to a run, and what a generated batch reports back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol, Sequence

from llem.config.schema import ExperimentConfig
from llem.prompts import Prompt


@dataclass
class LoadedModel:
    """A model ready to generate, plus what the run needs to describe it."""

    model: Any
    tokenizer: Any
    device: str  # "cuda" or "cpu"
    dtype: str
    load_kwargs: Dict[str, Any]  # exactly what from_pretrained received (reprs for objects)
    load_key: str  # identical keys load identical models (used for reuse across a sweep)
    load_s: float
    source: str  # where the weights came from (path, or the GGUF conversion cache)
    n_parameters: Optional[int]  # None: unknown (flops_estimate is then null with the reason)
    n_embedding_parameters: int
    weight_bytes_per_decode_step: Optional[int]
    notes: Dict[str, Any] = field(default_factory=dict)


@dataclass
class BatchOutput:
    """One generate() call: exact token counts and per-step timestamps (perf_counter seconds)."""

    start_s: float
    end_s: float
    input_tokens: List[int]  # real prompt tokens per request (no padding)
    output_tokens: List[int]  # generated tokens per request, up to and including the first EOS
    step_times_s: List[float]  # when each decoding step's tokens reached the host
    step_tokens: List[int]  # tokens added per request by each step (1, or more with prompt lookup)
    texts: Optional[List[str]] = None
    # Engines that schedule each request on its own (continuous batching) report each request's
    # own timeline instead: when its tokens reached the host, and how many arrived each time.
    # When set, latency figures are computed from these, per request.
    request_step_times_s: Optional[List[List[float]]] = None
    request_step_tokens: Optional[List[List[int]]] = None


class Backend(Protocol):
    name: str

    def load(self, exp: ExperimentConfig, device: str) -> LoadedModel: ...

    def generate(
        self, loaded: LoadedModel, exp: ExperimentConfig, prompts: Sequence[Prompt]
    ) -> BatchOutput: ...

    def unload(self, loaded: LoadedModel) -> None: ...


def split_batches(
    backend: object, exp: ExperimentConfig, prompts: List[Prompt]
) -> List[List[Prompt]]:
    """The prompt set cut the way ``backend`` hands it to ``generate``.

    A backend with a ``batches(exp, prompts)`` method decides (vllm: one batch, the engine
    schedules); otherwise ``pytorch.batch_size`` prompts per call.
    """
    own = getattr(backend, "batches", None)
    if own is not None:
        return own(exp, prompts)
    size = exp.pytorch.batch_size
    return [prompts[i : i + size] for i in range(0, len(prompts), size)]

"""What an engine is built with (``BackendSections``) and everything a run asks of it (the
``Backend`` protocol).

Imports llem.config and the vocabulary's other modules; writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from llem.config.decoder import DecoderConfig
from llem.config.measurement import MeasurementConfig
from llem.config.model import ModelConfig
from llem.config.quantization import QuantizationConfig
from llem.config.speculative import SpeculativeConfig
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import BatchOutput, Prompt, ScheduledRequest, ServeOutput

ConfigT = TypeVar("ConfigT")
ConfigT_co = TypeVar("ConfigT_co", covariant=True)


@dataclass(frozen=True)
class BackendSections(Generic[ConfigT]):
    """What a backend is built with: its own engine section and the shared sections it reads.

    ``engine`` is the backend's own group (``pytorch:``, ``vllm:``); the rest are the model,
    decoding and quantization groups, the ``from_pretrained`` passthrough, the top-level seed, the
    run's own seed (``run_seed``, what ``lifecycle.seed`` records) and whether generated texts are
    kept (``measurement.save_outputs``).
    """

    engine: ConfigT
    model: ModelConfig
    decoder: DecoderConfig
    quantization: QuantizationConfig = field(default_factory=QuantizationConfig)
    passthrough_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    run_seed: int = 0  # this run's seed (``lifecycle.seed``: seed + repeat when sampling)
    save_outputs: bool = False
    speculative: SpeculativeConfig = field(default_factory=SpeculativeConfig)
    # The run serves a workload through ``Backend.serve`` (continuous batching with streamed
    # outputs) rather than ``generate`` batches: an engine that needs another engine object for it
    # (vLLM's AsyncLLM) builds that one, and its load key differs.
    serving: bool = False
    # the run's directory, where the engine writes files of its own (a launched server's log);
    # None outside a run (pre-flight, planning)
    run_dir: Path | None = None


class Backend(Protocol[ConfigT_co]):
    """Everything a run asks of an engine (the run layer, ``llem.runner``, calls only these).

    A backend is built for one run with that run's sections (``llem.backends.create_backend``);
    a ``LoadedModel`` may outlive it, reused by the next run's backend when the load keys match.
    """

    name: str

    @property
    def config(self) -> ConfigT_co:
        """The backend's own config section (``pytorch:`` or ``vllm:``)."""
        ...

    def load_key(self, device: str) -> str:
        """Equal keys load equal models: the run reuses a loaded model across equal keys."""
        ...

    def torch_device_indices(self) -> list[int]:
        """The torch CUDA indices the model will be placed on (what a CUDA run measures)."""
        ...

    def measures_named_gpus(self, measurement: MeasurementConfig) -> bool:
        """Whether the run's energy is that of GPUs named for the engine (a server's
        ``server.gpus``), whatever llem's own device: the run then measures them as the GPUs of
        its vendor's library (``GpuLibrary.torch_device_type``). False: the engine runs on
        llem's own device, and the run measures that."""
        ...

    def energy_refusal(self, measurement: MeasurementConfig) -> str | None:
        """Why this machine's GPUs must not be measured as this run's (a running server on
        another host, or whose GPUs are not named): the energy is then null with this reason.
        None: measure as ``measurement`` says."""
        ...

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        """The prompt set cut the way this backend hands it to ``generate``."""
        ...

    def batch_size(self, loaded: LoadedModel) -> int:
        """Requests the engine works on together, at most (the result's ``workload.batch_size``);
        0 when the engine does not know (a running server whose limit llem was not told)."""
        ...

    def load(self, device: str) -> LoadedModel: ...

    def warm_up(
        self, loaded: LoadedModel, batches: Sequence[Sequence[Prompt]], n_batches: int
    ) -> None:
        """Run ``n_batches`` warm-up batches (and whatever first-use work, such as compilation,
        must stay out of the measured window); ``loaded.torch_compile`` then says what runs."""
        ...

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput: ...

    def serve(
        self, loaded: LoadedModel, requests: Sequence[ScheduledRequest], max_concurrency: int | None
    ) -> ServeOutput:
        """Serve a workload: send each request at its ``scheduled_s`` (open loop, offline), or
        keep ``max_concurrency`` requests in flight (closed loop, ``scheduled_s`` None), through
        the engine's continuous batching, streaming each request's tokens. Pacing is the shared
        ``llem.backends.traffic`` driver's; the engine only submits and streams."""
        ...

    def unload(self, loaded: LoadedModel | None) -> None: ...

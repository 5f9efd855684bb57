"""The vocabulary that engines, figures and the run share: prompts, batch outputs, model shape,
the loaded model and the ``Backend`` protocol.

A leaf module: it imports nothing of llem's but the configuration, so every layer above can name
these types without pulling in the modules that do the work.

Imports llem.config and the base modules; writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from llem.config.decoder import DecoderConfig
from llem.config.measurement import MeasurementConfig
from llem.config.model import ModelConfig
from llem.config.quantization import QuantizationConfig
from llem.config.speculative import SpeculativeConfig


@dataclass(frozen=True)
class Prompt:
    """One prompt: natural-language ``text`` or exact ``token_ids`` (exactly one is set).

    ``token_ids`` (synthetic or chat-templated prompts) are fed to the model as they are: the
    backend adds no special tokens to them.

    ``stop``: strings that end the request's generation as soon as its output contains one (an
    lm-eval task's ``until`` and the tokenizer's EOS), on every engine; the tokens up to and
    including the one that completed the stop string are the request's output tokens. Empty:
    generation ends at EOS or ``decoder.max_new_tokens`` only.
    """

    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.text is None) == (self.token_ids is None):
            raise ValueError("a Prompt has either text or token_ids, not both or neither")


@dataclass
class BatchOutput:
    """One generate() call: exact token counts and per-step timestamps (perf_counter seconds)."""

    start_s: float
    end_s: float
    input_tokens: list[int]  # real prompt tokens per request (no padding)
    # generated tokens per request, up to and including the first EOS or the token that completed
    # one of the prompt's stop strings (``Prompt.stop``)
    output_tokens: list[int]
    step_times_s: list[float]  # when each decoding step's tokens reached the host
    step_tokens: list[int]  # tokens added per request by each step (1, or more with prompt lookup)
    texts: list[str] | None = None  # decoded outputs (measurement.save_outputs=true only)
    num_beams: int = 1  # beams per request (every beam runs prefill and decode)
    # Engines that schedule each request on its own (continuous batching) report each request's
    # own timeline instead: when its tokens reached the host, and how many arrived each time.
    # When set, latency figures are computed from these, per request.
    request_step_times_s: list[list[float]] | None = None
    request_step_tokens: list[list[int]] | None = None
    # Prompt tokens per request whose KV came from a prefix cache instead of prefill (engines
    # with a prefix cache that report it; None where unknown).
    cached_input_tokens: list[int] | None = None
    # The engine's own steps where it schedules the batch itself (vLLM's offline engine), with
    # request ids numbered from 0 in the order of ``input_tokens``; None where it does not say
    # (static batches' steps follow from ``step_times_s``: ``llem.figures.engine_steps``).
    steps: list[EngineStep] | None = None
    step_clock: str | None = None  # how the engine's step times were taken (one sentence)
    # Why the steps' per-request shares are llem's estimate, not the engine's record (None: the
    # engine's, or no shares): a request's energy is then not published.
    shares_estimated: str | None = None
    # Why each request ended, as the OpenAI API says it: "stop" (EOS or a stop string), "length"
    # (``decoder.max_new_tokens``); None where the engine does not say.
    finish_reasons: list[str | None] | None = None


@dataclass(frozen=True)
class ScheduledRequest:
    """One request of a serving workload (``Backend.serve``): which prompt, and when it is due.

    ``scheduled_s`` is seconds after the workload's origin (``ServeOutput.start_s``): the planned
    send time of open-loop traffic (drawn from ``traffic.seed`` before the window), 0 for offline
    traffic (every request at once), and None for closed-loop traffic, where a request is sent as
    soon as one of the ``traffic.max_concurrency`` slots frees.
    """

    request_id: int
    prompt_index: int  # index into the prompt set (requests beyond it cycle through the prompts)
    prompt: Prompt
    scheduled_s: float | None


@dataclass
class RequestTimeline:
    """What happened to one request, on the run's one clock (``time.perf_counter`` seconds).

    ``chunk_times_s[k]`` is when the k-th streamed chunk reached the host and ``chunk_tokens[k]``
    how many output tokens it carried (a chunk may carry several). ``arrival_s`` is the origin of
    TTFT and end-to-end latency: the scheduled send time (open loop, offline), the actual send time
    (closed loop) or the batch's start (static batches); ``ServeOutput.ttft_origin`` says which.
    """

    request_id: int
    prompt_index: int
    arrival_s: float
    scheduled_s: float | None  # absolute planned send time; None for closed loop
    sent_s: float  # when the engine was handed the request
    chunk_times_s: list[float]
    chunk_tokens: list[int]
    input_tokens: int
    cached_input_tokens: int | None = None  # prompt tokens served from a prefix cache
    text: str | None = None  # decoded output (measurement.save_outputs=true only)
    # "stop" (EOS or a stop string) or "length" (max tokens), as the OpenAI API says it; None
    # where the engine does not say
    finish_reason: str | None = None

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_tokens)

    @property
    def first_token_s(self) -> float | None:
        return self.chunk_times_s[0] if self.chunk_times_s else None

    @property
    def finish_s(self) -> float | None:
        return self.chunk_times_s[-1] if self.chunk_times_s else None


@dataclass(frozen=True)
class StepShare:
    """What one request computed in one engine step: prompt tokens prefilled, tokens decoded."""

    request_id: int
    prefill_tokens: int
    decode_tokens: int


@dataclass
class EngineStep:
    """One engine iteration where the engine exposes it: when it began and ended, how many
    requests ran, the tokens it computed and, where known, each request's share of them.

    ``start_s`` is None where the engine gives no start (the step then starts where the previous
    one ended); ``shares`` is None where the engine does not say which requests ran.
    ``ServeOutput.step_clock`` says which clock the engine's step times come from."""

    end_s: float  # perf_counter seconds
    running: int  # requests in the running batch
    prefill_tokens: int | None = None
    decode_tokens: int | None = None
    start_s: float | None = None  # perf_counter seconds
    shares: tuple[StepShare, ...] | None = None

    @classmethod
    def of_shares(cls, start_s: float, end_s: float, shares: Sequence[StepShare]) -> EngineStep:
        """The step whose requests computed ``shares``: its totals are theirs."""
        return cls(
            end_s=end_s,
            running=len(shares),
            prefill_tokens=sum(s.prefill_tokens for s in shares),
            decode_tokens=sum(s.decode_tokens for s in shares),
            start_s=start_s,
            shares=tuple(shares),
        )


@dataclass
class ServeOutput:
    """``Backend.serve``: every request's timeline, on the clock of ``start_s`` (the origin)."""

    start_s: float  # perf_counter at the workload's origin (scheduled_s = 0)
    end_s: float  # when the last request finished
    requests: list[RequestTimeline]
    ttft_origin: str  # "scheduled send" | "actual send" | "batch start"
    steps: list[EngineStep] | None = None  # None: the engine does not expose its steps
    num_beams: int = 1
    # how the engine's step times were taken (one sentence); with ``steps`` None, why it has none
    step_clock: str | None = None
    shares_estimated: str | None = None  # as ``BatchOutput.shares_estimated``
    # why the requests have no per-token times (first token, gaps), None where they have them:
    # answers that came whole (``server.stream=false``)
    token_times: str | None = None


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

    def fill_result(self, result: Any) -> None:
        """Write what the engine keeps of itself into the run's result (an engine section such
        as ``server``); nothing for an engine in this process."""

    def fill_window(self, result: Any, run_dir: Path) -> None:
        """After the measured window: what the engine saw of the window itself (a server's own
        /metrics) into the run's result and run directory; nothing for an engine in this
        process."""

    def gpus_used(self) -> EngineGpus | None:
        """After ``fill_window``: the GPUs the engine's processes held in the window (a server's),
        judged by the run against those it measured; None: the engine runs in llem's own
        processes, on the GPUs the run measures."""
        return None

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

    def energy_device(self, device: str, measurement: MeasurementConfig) -> str:
        """The device whose energy the run measures, given llem's own ``device``: that device
        for an engine in llem's processes; ``cuda`` for a server whose GPUs are named
        (``server.gpus``), whatever llem's own torch sees."""
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

"""What a run hands an engine and what the engine hands back: prompts, scheduled requests, batch
outputs, each request's timeline, the engine's steps and a served workload.

Imports nothing of llem's; writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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

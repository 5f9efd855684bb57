"""The serving sections of result.json (schema 3): ``traffic``, ``concurrency``, ``steady_state``,
``goodput``, and the latency figures serving adds (``ttft_origin``, ``tpot_ms``, ``e2e_ms``, and
from schema 5 ``itl_per_token_ms``, ``ttft_from_schedule_ms``, ``e2e_from_schedule_ms``).

The definitions (TTFT, TPOT, ITL, end-to-end, concurrency, goodput) are in
``llem.figures.serving``, the steady state's edges in ``llem.figures.steady_state``. A section that
does not apply is null, with the reason in ``null_reasons`` under the section's name
(``"steady_state"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llem.result.figure import (
    bound,
    check_bounds,
    ci95,
    figure,
    figure_specs,
    interval_figure,
)
from llem.result.sections import FitRecord, Percentiles


@dataclass
class Latency:
    """Every request's latency, and the seconds inside generate() (``generate_s``). ``ttft_ms``,
    ``itl_ms``, ``tpot_ms``, ``e2e_ms`` and ``request_latency_s`` follow vLLM's ``bench serve``
    (from each request's send; one ITL per streamed chunk); ``ttft_origin`` says what the send
    was (``llem.figures.timelines``: actual send | batch start | all prompts at once). llem's own
    figures have their own names: ``itl_per_token_ms`` (a chunk's gap spread over its tokens)
    and ``ttft_from_schedule_ms`` / ``e2e_from_schedule_ms`` (from the scheduled send, pacing
    lateness included)."""

    generate_s: float | None = None
    ttft_ms: Percentiles = field(default_factory=Percentiles)
    itl_ms: Percentiles = field(default_factory=Percentiles)
    request_latency_s: Percentiles = field(default_factory=Percentiles)
    ttft_origin: str | None = None  # actual send | batch start | all prompts at once
    tpot_ms: Percentiles = field(default_factory=Percentiles)
    e2e_ms: Percentiles = field(default_factory=Percentiles)
    itl_per_token_ms: Percentiles = field(default_factory=Percentiles)
    ttft_from_schedule_ms: Percentiles = field(default_factory=Percentiles)
    e2e_from_schedule_ms: Percentiles = field(default_factory=Percentiles)


@dataclass
class Lateness:
    """Actual send - scheduled send (ms) over the requests."""

    p50: float | None = None
    p99: float | None = None
    max: float | None = None


@dataclass
class Traffic:
    """The traffic the run served, as configured, and how well it was paced."""

    kind: str | None = None  # offline | poisson | gamma | constant | concurrency
    rate_per_s: float | None = None
    burstiness: float | None = None
    n_requests: int | None = None  # requests sent in the window
    max_concurrency: int | None = None
    seed: int | None = None
    pacing_lateness_ms: Lateness | None = None  # null for offline and closed-loop traffic


@dataclass
class Concurrency:
    """What ran beside the knob that bounds it: requests in flight (sent, not yet finished)."""

    knob: str | None = None  # the key that bounds it: vllm.max_num_seqs, pytorch.batch_size, ...
    knob_value: int | None = None
    mean: float | None = None  # time-weighted over the measured window
    max: int | None = None  # most in flight at once in the measured window
    steady_state_mean: float | None = None  # time-weighted over the steady state
    running_mean: float | None = None  # the running batch, time-weighted over the window
    running_max: int | None = None
    steady_state_running_mean: float | None = None
    # the engine's own running batch per step (steps.csv), step-duration-weighted over the window
    engine_running_mean: float | None = None
    engine_running_max: int | None = None
    # how the engine's step times (steps.csv) were taken; null with the reason when it has none
    engine_step_clock: str | None = None
    definition: str = (
        "requests in flight = sent and not yet finished (queued ones included); running = "
        "between their first and last token; mean = the count's time integral / span"
    )


@dataclass(frozen=True)
class SteadyState:
    """The steady state: its edges (seconds from the measured window's start), what was generated
    in it and its energy (read at its edges; see ``llem.measure.interval``)."""

    rule: str  # mlenergy_v3 | open_loop (see llem.figures.steady_state)
    start_s: float
    end_s: float
    window_s: float
    requests: int  # requests that finished inside it
    output_tokens: int  # tokens that reached the host inside it
    output_tokens_per_s: float
    mean_concurrency: float
    mean_running: float | None = None  # the running batch (first token .. finish), time-weighted
    energy_j: float | None = figure(bounded=True)
    j_per_output_token: float | None = figure(bounded=True)
    avg_power_w: float | None = figure(bounded=True)
    energy_j_uncertainty: float | None = bound()
    j_per_output_token_uncertainty: float | None = bound()
    avg_power_w_uncertainty: float | None = bound()
    # the same split as energy's over the steady state's own steps (llem.figures.attribution)
    prefill_j: float | None = interval_figure()
    decode_j: float | None = interval_figure()
    between_steps_j: float | None = interval_figure()
    j_per_prefill_token: float | None = interval_figure()
    j_per_decode_token: float | None = interval_figure()
    fit: FitRecord | None = figure()
    attribution_method: str | None = None
    prefill_j_uncertainty: float | None = bound()
    decode_j_uncertainty: float | None = bound()
    between_steps_j_uncertainty: float | None = bound()
    j_per_prefill_token_uncertainty: float | None = bound()
    j_per_decode_token_uncertainty: float | None = bound()
    # each attributed figure's 95 % interval: half-width, the figure's unit (llem.figures.interval)
    prefill_j_ci95_half_width: float | None = ci95()
    decode_j_ci95_half_width: float | None = ci95()
    between_steps_j_ci95_half_width: float | None = ci95()
    j_per_prefill_token_ci95_half_width: float | None = ci95()
    j_per_decode_token_ci95_half_width: float | None = ci95()

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass(frozen=True)
class Goodput:
    """The requests that met every SLO set (a null SLO is not judged)."""

    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    slo_e2e_ms: float | None
    requests_met: int
    fraction: float
    requests_per_s: float  # over the measured window
    output_tokens_per_s: float  # their output tokens over the measured window
    j_per_output_token: float | None = figure(bounded=True)
    j_per_output_token_uncertainty: float | None = bound()
    definition: str = (
        "j_per_output_token = the measured window's total_j / output tokens of the requests that "
        "met every SLO (energy spent on requests that missed is charged to the good ones)"
    )

    def __post_init__(self) -> None:
        check_bounds(self)


for _section in (SteadyState, Goodput):
    figure_specs(_section)

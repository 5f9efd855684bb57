"""The sections of result.json, one dataclass each, in schema order.

Figures that measurement hands over (``Energy``, ``Thermal``, ``Validity``) are frozen: they are set
with their bounds and null reasons in one step (``llem.result.figure.with_figures``). Which fields
are figures, and which carry an ``X_uncertainty`` bound, is declared here with ``figure()``,
``figure_map()`` and ``bound()`` and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from llem.errors import LlemError, first_line
from llem.result.figure import (
    bound,
    check_bounds,
    ci95,
    figure,
    figure_map,
    figure_specs,
    interval_figure,
)
from llem.vocabulary.processes import OtherProcess


def utc_now() -> str:
    """Now, in UTC, ISO 8601 to the second (``2026-11-21T10:00:00+00:00``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def quantization_label(load_in_4bit: bool, load_in_8bit: bool, quant_type: str | None) -> str:
    if load_in_4bit:
        return f"bnb-4bit-{quant_type}" if quant_type else "bnb-4bit"
    if load_in_8bit:
        return "bnb-8bit"
    return "none"


@dataclass
class Percentiles:
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


@dataclass
class ErrorInfo:
    type: str
    message: str
    hint: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """A known llem error as it was raised; anything else by its type and first line."""
        if isinstance(exc, LlemError):
            return cls(type(exc).__name__, exc.message, exc.hint)
        if isinstance(exc, KeyboardInterrupt):
            return cls("KeyboardInterrupt", "interrupted")
        if isinstance(exc, SystemExit) and exc.code == 128 + 15:  # SIGTERM's exit (143)
            return cls("SystemExit", "terminated by SIGTERM (exit 143)")
        return cls(
            type(exc).__name__,
            first_line(exc),
            "see llem.log in the run directory for the traceback",
        )


@dataclass
class Workload:
    n_prompts: int | None = None
    batch_size: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    passes: int | None = None
    requests: int | None = None
    chat_template_applied: bool | None = None
    output_tokens_definition: str = (
        "generated tokens up to and including the first EOS or the token that completed one of "
        "the request's stop strings, no padding"
    )
    # the stop strings every engine stopped each request at (an lm-eval task's ``until`` and the
    # tokenizer's EOS, as lm-eval passes them); None: the prompts had none (EOS and
    # decoder.max_new_tokens end a request)
    stop_strings: list[str] | None = None


@dataclass
class Throughput:
    output_tokens_per_s: float | None = None  # over the measured window, as J per token is
    requests_per_s: float | None = None
    generate_output_tokens_per_s: float | None = None  # over the time inside generate() only
    definition: str = (
        "output tokens / measured window seconds (the window energy is measured over, so "
        "avg_power_w / output_tokens_per_s = j_per_output_token); generate_output_tokens_per_s "
        "divides by the seconds inside generate() only"
    )


@dataclass(frozen=True)
class FitRecord:
    """The fitted step model behind an attribution (``energy.fit``, ``steady_state.fit``;
    ``llem.figures.energy_fit``): its coefficients (J/token, W, J/token^2) and their standard
    errors, the sensor's lag, R^2, the steps and intervals fitted, the intervals' least length
    and how the energy was split. A null entry's reason is ``null_reasons["<section>.fit.<key>"]``.
    Every entry may be absent from an older file (schema 7 had no ``k``, ``k_se``, ``lag_s``): it
    reads as null."""

    a: float | None = None  # J per prefill token
    a_se: float | None = None
    b: float | None = None  # J per decode token
    b_se: float | None = None
    p_static_w: float | None = None
    p_static_se: float | None = None
    p_between_w: float | None = None
    k: float | None = None  # the context cost
    k_se: float | None = None
    lag_s: float | None = None  # how far the steps were moved to meet the power timeline
    r2: float | None = None
    n_steps: int | None = None
    n_intervals: int | None = None
    interval_min_s: float | None = None
    split: str | None = None


@dataclass(frozen=True)
class Energy:
    """The window's energy. Bounds (``X_uncertainty``) are worst-case, in the figure's unit."""

    source: str = "unavailable"  # nvml_counter | nvml_power | replay | unavailable
    unavailable_reason: str | None = None
    window_s: float | None = figure()
    total_j: float | None = figure(bounded=True)
    per_device_j: dict[str, float | None] = figure_map()
    idle_power_w: float | None = figure(bounded=True)
    idle_adjusted_j: float | None = figure(bounded=True)
    j_per_output_token: float | None = figure(bounded=True)
    j_per_request: float | None = figure(bounded=True)
    avg_power_w: float | None = figure(bounded=True)
    peak_power_w: float | None = figure()
    warnings: list[str] = field(default_factory=list)
    cpu_source: str | None = None
    cpu_package_j: float | None = figure()
    cpu_unavailable_reason: str | None = None
    # per GPU (keyed by UUID, as per_device_j): its energy over the window's length, and its
    # highest power sample; empty in results written before they were recorded
    per_device_avg_power_w: dict[str, float | None] = figure_map()
    per_device_peak_power_w: dict[str, float | None] = figure_map(bounded=False)
    j_per_total_token: float | None = figure(bounded=True)  # input + output tokens
    output_tokens_per_j: float | None = figure(bounded=True)
    wh_per_1k_requests: float | None = figure(bounded=True)  # AI Energy Score's unit
    total_j_uncertainty: float | None = bound()
    per_device_j_uncertainty: dict[str, float | None] | None = bound()
    idle_power_w_uncertainty: float | None = bound()
    idle_adjusted_j_uncertainty: float | None = bound()
    j_per_output_token_uncertainty: float | None = bound()
    j_per_total_token_uncertainty: float | None = bound()
    j_per_request_uncertainty: float | None = bound()
    wh_per_1k_requests_uncertainty: float | None = bound()
    avg_power_w_uncertainty: float | None = bound()
    per_device_avg_power_w_uncertainty: dict[str, float | None] | None = bound()
    output_tokens_per_j_uncertainty: float | None = bound()
    uncertainty_method: str | None = None
    # what total_j_uncertainty is made of, J each, summed over devices (they add up to it):
    # sensor_accuracy_j, counter_resolution_j, counter_update_j, trapezoid_j, averaging_lag_j,
    # float_rounding_j (see llem.measure.uncertainty)
    uncertainty_components: dict[str, float] | None = None
    # measured_this_run | reused_from_process | cached (llem's cache dir) | not_measured
    idle_source: str | None = None
    idle_measured_at: str | None = figure()  # UTC ISO 8601
    idle_age_s: float | None = None  # age of the baseline when this run's session started
    idle_temperature_c: dict[str, float] | None = None  # the baseline's mean temperature per GPU
    # null (with the reason) when the source cannot tell
    other_processes: list[OtherProcess] | None = figure()
    definition: str | None = None
    # Where the energy goes (llem.figures.attribution): the window's engine steps split into
    # prefill and decode by a fitted step model, what falls between steps, the fitted costs and
    # what no request takes; prefill_j + decode_j + between_steps_j = total_j.
    prefill_j: float | None = interval_figure()
    decode_j: float | None = interval_figure()
    between_steps_j: float | None = interval_figure()
    j_per_prefill_token: float | None = interval_figure()  # the fit's a
    j_per_decode_token: float | None = interval_figure()  # the fit's b
    unattributed_j: float | None = interval_figure()  # total_j - the requests' energy_j
    fit: FitRecord | None = figure()
    attribution_method: str | None = None
    prefill_j_uncertainty: float | None = bound()
    decode_j_uncertainty: float | None = bound()
    between_steps_j_uncertainty: float | None = bound()
    j_per_prefill_token_uncertainty: float | None = bound()
    j_per_decode_token_uncertainty: float | None = bound()
    unattributed_j_uncertainty: float | None = bound()
    # each attributed figure's 95 % interval: half-width, the figure's unit (llem.figures.interval)
    prefill_j_ci95_half_width: float | None = ci95()
    decode_j_ci95_half_width: float | None = ci95()
    between_steps_j_ci95_half_width: float | None = ci95()
    j_per_prefill_token_ci95_half_width: float | None = ci95()
    j_per_decode_token_ci95_half_width: float | None = ci95()
    unattributed_j_ci95_half_width: float | None = ci95()

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass
class Memory:
    """MB here is 2^20 bytes."""

    peak_allocated_mb: float | None = None
    peak_reserved_mb: float | None = None
    peak_device_used_mb: float | None = figure()
    peak_host_rss_mb: float | None = None
    per_device: dict[str, dict[str, float]] = field(default_factory=dict)  # cuda:i -> peaks


@dataclass(frozen=True)
class Thermal:
    max_temp_c: float | None = figure()
    throttled: bool | None = figure()
    throttle_reasons: list[str] = field(default_factory=list)
    # A recorded condition, never an invalidation: the share of the window's device samples with a
    # power-cap reason (sw_power_cap), and the share per reason.
    power_capped_fraction: float | None = figure()
    power_cap_reasons: dict[str, float] = field(default_factory=dict)
    # A recorded condition: the largest rise over the measured GPUs of the least-squares line
    # through the window's temperatures, start to end (the window starts after the cool-down).
    temp_rise_c: float | None = figure()


@dataclass
class Compute:
    flops_estimate: float | None = None
    flops_formula: str = (
        "2 x (parameters - input embedding + tied LM head) x num_beams x (input + output tokens)"
    )
    parameters: int | None = None  # real count (quantization packing undone)
    matmul_parameters: int | None = None
    decode_bandwidth_utilisation: float | None = None
    decode_bytes_per_s: float | None = None
    decode_weight_bytes: int | None = None  # summed over the timed decode steps
    decode_kv_bytes: int | None = None  # KV-cache reads, summed over the timed decode steps
    memory_bandwidth_bytes_per_s: float | None = None  # the one GPU a decode step runs on
    non_embedding_parameters: int | None = None  # schema 1 only


@dataclass(frozen=True, kw_only=True)
class GpuRecord:
    """One measured GPU in ``hardware.gpus``. Memory in MB (2^20 bytes), limits in W.

    Results written before schema 7 named no ``torch_index``, ``vendor`` or ``vendor_index``
    (their migration adds them) and some before a default limit was read lack
    ``default_power_limit_w``: what a file lacks reads as null."""

    torch_index: int | None = None
    vendor: str | None = None  # the GPU library's vendor (nvidia, amd); null for a replay
    vendor_index: int | None = None  # the GPU's number in its vendor library
    uuid: str
    name: str
    memory_total_mb: float | None = None
    power_limit_w: float | None = None  # the enforced power limit
    default_power_limit_w: float | None = None  # the limit the GPU ships with


@dataclass
class Hardware:
    """What the numbers were measured on (the report never pools runs across different hardware)."""

    hostname: str | None = None
    gpu_model: str | None = None  # the measured GPUs' name ("A + B" when they differ); None: CPU
    gpu_count: int = 0
    gpus: list[GpuRecord] = field(default_factory=list)
    # torch's intra-op and inter-op CPU threads in this run (llem.runner.threads chooses them);
    # null for a vllm run (its engine has its own) and in results written before they were recorded
    torch_threads: int | None = None
    torch_interop_threads: int | None = None


@dataclass
class Lifecycle:
    backend_chosen_by: str | None = None  # config | detected
    preflight_warnings: list[str] = field(default_factory=list)
    load_s: float | None = None
    model_reused: bool | None = None
    model_source: str | None = None
    load_kwargs: dict[str, Any] = field(default_factory=dict)
    # what ran in the window: active | eager fallback: ... | failed: ... | None (off)
    torch_compile: str | None = None
    # torch.compile on: Dynamo's compilations inside the window (0 when the warm-up covered every
    # batch shape; more fails validity check compilations_in_window); null when it is off
    compilations_in_window: int | None = None
    # torch.compile on: forward calls in the window that ran eagerly (no compiled graph ran: a
    # frame past Dynamo's recompile limit); null when it is off
    eager_calls_in_window: int | None = None
    seed: int | None = None  # torch seed of this run (seed + repeat for a sampling decoder)
    # vllm: whether the engine's prefix cache was on, and the share of the window's prompt tokens
    # it served instead of prefill (null for pytorch, which has none)
    prefix_caching: bool | None = None
    prefix_cache_hit_rate: float | None = None
    warmup_s: float | None = None
    cooldown_waited_s: float | None = None
    start_temp_c: float | None = None
    # The scheduler's job that ran this point (SLURM_JOB_ID) and its node (SLURMD_NODENAME);
    # null outside a SLURM job.
    slurm_job_id: str | None = None
    node: str | None = None


@dataclass
class SweepPosition:
    """A sweep point's grid index (= its directory name) and its place in the run order.

    A finished result that a re-run finds at another index is moved to its point's directory:
    ``grid_index`` becomes the new index and ``moved_from`` the directory it was found in, while
    ``position``, ``of``, ``order`` and ``seed`` still describe the run order it ran in."""

    grid_index: int
    position: int | None
    of: int
    order: str
    seed: int
    moved_from: int | None = None


@dataclass(frozen=True)
class Validity:
    """Whether the energy figure can be trusted: a verdict, its problems, and each check
    (``passed``, ``failed``, ``condition`` or ``not checked``). ``energy_valid`` is null when no
    energy was measured. ``conditions`` are what a check found that is recorded, not judged
    (running at the power cap, say): one sentence each, never counted against the verdict."""

    energy_valid: bool | None = figure()
    problems: list[str] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)
    conditions: list[str] = field(default_factory=list)
    # each GPU's outcome of the checks judged per GPU ({uuid: {check: status}}); null in results
    # written before it was recorded
    per_device: dict[str, dict[str, str]] | None = None


for _section in (Energy, Memory, Thermal, Validity):
    figure_specs(_section)  # a bounded figure without its bound field fails here, at import

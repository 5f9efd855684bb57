"""The ``measurement:`` group: energy, power and timing measurement."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from llem.config.knobs import LLEM, knob


class EnergySource(Enum):
    auto = "auto"
    nvml = "nvml"
    amdsmi = "amdsmi"
    replay = "replay"
    none = "none"


class BoundaryKind(Enum):
    gpu = "gpu"
    node = "node"


@dataclass
class MeasurementConfig:
    warmup: int = knob(
        1,
        doc="Warm-up batches run before the measured window (not measured).",
        goes_to=LLEM,
        ge=0,
    )
    idle_baseline_s: float = knob(
        5.0,
        doc="Seconds of idle power measured before the model loads (GPU only); 0 skips it.",
        goes_to=LLEM,
        ge=0,
    )
    sample_hz: float = knob(
        10.0,
        doc="Rate of the power, temperature and memory sampler (Hz). 10 Hz sees every NVML "
        "reading (its energy counter and power readings change about every 100 ms); a faster "
        "sampler repeats readings and resolves no shorter span.",
        goes_to=LLEM,
        gt=0,
        le=1000,
    )
    cooldown_s: float = knob(
        0.0,
        doc="Seconds to wait before the measured window (the upper bound when waiting on "
        "temperature).",
        goes_to=LLEM,
        ge=0,
    )
    cooldown_temp_margin_c: float | None = knob(
        None,
        doc="Wait until every GPU is at most this many °C above its idle temperature.",
        goes_to=LLEM,
        ge=0,
    )
    min_window_s: float = knob(
        5.0,
        doc="Repeat whole passes over the prompts until the measured window is this long.",
        goes_to=LLEM,
        ge=0,
    )
    energy: EnergySource = knob(
        EnergySource.auto,
        doc="Energy source: auto is NVML (then amdsmi) on a GPU when it works, else unavailable "
        "with a reason; nvml or amdsmi insist on that library.",
        goes_to=LLEM,
    )
    boundary: BoundaryKind = knob(
        BoundaryKind.gpu,
        doc="What the energy covers: gpu (the GPUs the run uses) or node (those GPUs plus this "
        "host's CPU packages and DRAM, read through RAPL over the same window and idle-adjusted "
        "the same way). The result's boundary section names what is inside and outside. A node "
        "of which no part can be read here is refused at pre-flight (exit 3).",
        goes_to=LLEM,
    )
    replay_trace: str | None = knob(
        None,
        doc="CSV power trace (time_s,device,power_w) played for energy=replay.",
        goes_to=LLEM,
    )
    gpu_indices: list[int] | None = knob(
        None,
        doc="Torch device indices to measure; null measures the devices the model is on.",
        goes_to=LLEM,
        ge=0,
    )
    idle_max_age_s: float | None = knob(
        None,
        doc="Re-measure the process's idle baseline when older than this (s), after the GPU "
        "cools to within idle_temp_margin_c of its idle temperature; null: never re-measured.",
        goes_to=LLEM,
        gt=0,
    )
    idle_cache_max_age_s: float = knob(
        3600.0,
        doc="Use a GPU's idle baseline kept in llem's cache directory (LLEM_CACHE_DIR, default "
        "~/.cache/llem) by an earlier process for this long (s), once the GPU is back near its "
        "idle temperature, instead of measuring a GPU the previous process left hot; 0: off.",
        goes_to=LLEM,
        ge=0,
    )
    idle_temp_margin_c: float = knob(
        3.0,
        doc="How close (°C) to its idle temperature a GPU must be before idle is re-measured.",
        goes_to=LLEM,
        ge=0,
    )
    min_valid_window_s: float = knob(
        5.0,
        doc="Validity: a measured window shorter than this (s) fails the window_length check.",
        goes_to=LLEM,
        ge=0,
    )
    min_sample_coverage: float = knob(
        0.9,
        doc="Validity: the fraction of the expected power samples that must exist.",
        goes_to=LLEM,
        ge=0,
        le=1,
    )
    max_temp_rise_c: float = knob(
        3.0,
        doc="Validity: a larger fitted temperature rise (°C) over the window is a condition.",
        goes_to=LLEM,
        ge=0,
    )
    idle_power_min_w: float = knob(
        2.0,
        doc="Validity: idle power per GPU below this (W) is implausible.",
        goes_to=LLEM,
        ge=0,
    )
    idle_power_max_fraction: float = knob(
        0.5,
        doc="Validity: idle power above this share of the GPU's default power limit (not the "
        "limit set) is implausible.",
        goes_to=LLEM,
        gt=0,
        le=1,
    )
    min_steady_state_s: float = knob(
        20.0,
        doc="Steady state: a window shorter than this (s) is no steady state (ML.ENERGY's 20 s).",
        goes_to=LLEM,
        ge=0,
    )
    min_steady_concurrency: float = knob(
        0.85,
        doc="Steady state: a mean concurrency under this fraction of the configured batch is no "
        "steady state (ML.ENERGY's 0.85).",
        goes_to=LLEM,
        ge=0,
        le=1,
    )
    save_outputs: bool = knob(
        False,
        doc="Write generations.jsonl in the run directory (request, output tokens, text).",
        goes_to=LLEM,
    )

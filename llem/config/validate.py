"""Turn a composed Hydra config into a checked ``ExperimentConfig``.

Hydra and OmegaConf already reject misspelt keys, wrong types and unknown enum values while
composing. This module adds what they let through (keys added with ``+`` that no schema has,
missing required values), the ranges declared in the schema (checked by one walker, see
``llem/config/knobs.py``) and the cross-field rules, and reports every violation at once, each
naming its keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from llem.config import knobs
from llem.config.architectures import weights_problems
from llem.config.batching import (
    CACHE_IMPLEMENTATION,
    MIN_NEW_TOKENS,
    PROMPT_LOOKUP,
    TORCH_COMPILE,
    USE_CACHE,
)
from llem.config.batching import (  # re-exported: its home before the engine table
    continuous_batching_problems as continuous_batching_problems,
)
from llem.config.dataset import chat_template_problems, scoring_problems
from llem.config.engines import engine_problems
from llem.config.footprint import footprint_problems
from llem.config.gpu import gpu_problems
from llem.config.knobs import Knob, range_problems, section_class, show
from llem.config.reference import CONF_DIR
from llem.config.schema import (
    DatasetConfig,
    DatasetSource,
    DecoderConfig,
    EnergySource,
    ExperimentConfig,
    MeasurementConfig,
    PyTorchConfig,
    QuantizationConfig,
    TrafficConfig,
    TrafficKind,
)
from llem.config.speculative import speculative_problems
from llem.config.tracking import tracking_problems
from llem.config.traffic import OPEN_LOOP, planned_requests
from llem.errors import ConfigError


def _key(dotted: str) -> str:
    return knobs.key(ExperimentConfig, dotted)


# Keys named by the cross-field rules, checked against the schema when this module is imported.
LOAD_IN_4BIT = _key("quantization.load_in_4bit")
LOAD_IN_8BIT = _key("quantization.load_in_8bit")
MAX_MEMORY = _key("pytorch.max_memory")
MAX_NEW_TOKENS = _key("decoder.max_new_tokens")
DATASET_SOURCE = _key("dataset.source")
DATASET_PATH = _key("dataset.path")
INPUT_TOKENS = _key("dataset.input_tokens")
ENERGY = _key("measurement.energy")
REPLAY_TRACE = _key("measurement.replay_trace")
RATE = _key("traffic.rate_per_s")
BURSTINESS = _key("traffic.burstiness")
MAX_CONCURRENCY = _key("traffic.max_concurrency")
N_REQUESTS = _key("traffic.n_requests")
DURATION = _key("traffic.duration_s")
WARMUP_REQUESTS = _key("traffic.warmup_requests")
COOLDOWN_REQUESTS = _key("traffic.cooldown_requests")

# Knobs that only mean something when a switch is on: every bnb_4bit_* field, every torch_compile_*.
_NEEDS_4BIT = [
    f.name for f in dataclasses.fields(QuantizationConfig) if f.name.startswith("bnb_4bit_")
]
_NEEDS_COMPILE = [
    f.name for f in dataclasses.fields(PyTorchConfig) if f.name.startswith("torch_compile_")
]


def group_hint(key: str) -> str:
    """For a group of options that is not selected by default (``stack``, ``experiment``): how
    to select one (``+stack=NAME``), with its options; else ''."""
    group = CONF_DIR / key
    if "." in key or not group.is_dir() or key == "hydra":
        return ""
    names = sorted(p.stem for p in group.glob("*.yaml"))
    return f"; {key} is a group of options: select one with +{key}=NAME ({', '.join(names)})"


def _unknown_keys(node: Any, schema: type, prefix: str) -> list[str]:
    """Keys present in the composed config that the dataclass schema does not declare."""
    if not isinstance(node, DictConfig):
        return []
    fields = {f.name: f for f in dataclasses.fields(schema)}
    found = []
    for name in node:
        full = f"{prefix}{name!s}"
        if name not in fields:
            allowed = ", ".join(sorted(fields))
            found.append(
                f"{full}: no such key{group_hint(full)} (allowed keys under "
                f"'{prefix[:-1] or 'root'}': {allowed})"
            )
            continue
        sub = section_class(fields[name])
        if sub is not None:
            found.extend(_unknown_keys(node._get_node(name), sub, f"{full}."))
    return found


def _placeholders() -> dict[str, str | None]:
    return {
        k: d.placeholder
        for k, f, _ in knobs.walk_schema(ExperimentConfig)
        if isinstance(d := knobs.declaration(f), Knob)
    }


def _missing_message(dotted: str) -> str:
    placeholder = _placeholders().get(dotted)
    how = f"set {dotted}={placeholder}" if placeholder else "set it on the command line"
    return f"{dotted} is required but has no value ({how})"


def to_experiment(cfg: DictConfig | ExperimentConfig) -> ExperimentConfig:
    """Build the dataclass tree and check every range and cross-field rule.

    Raises ``ConfigError`` listing every problem found.
    """
    if isinstance(cfg, ExperimentConfig):
        exp = cfg
    else:
        problems = _unknown_keys(cfg, ExperimentConfig, "")
        missing = sorted(OmegaConf.missing_keys(cfg))
        problems.extend(_missing_message(k) for k in missing)
        if problems:
            raise ConfigError(problems)
        try:
            exp = OmegaConf.to_object(cfg)  # type: ignore[assignment]
        except MissingMandatoryValue as exc:  # pragma: no cover - caught above
            raise ConfigError(_missing_message(str(exc.full_key))) from None
        except OmegaConfBaseException as exc:
            key = getattr(exc, "full_key", None) or "config"
            raise ConfigError(f"{key}: {str(exc).splitlines()[0]}") from None
    check_rules(exp)
    return exp


def cross_field_problems(exp: ExperimentConfig) -> list[str]:
    """Every value out of its declared range and every violated rule between fields.

    Each problem names its keys, the bad values and what is allowed.
    """
    return [
        *range_problems(exp),
        *weights_problems(exp.model),
        *_quantization_problems(exp.quantization),
        *_pytorch_problems(exp.pytorch),
        *_decoder_problems(exp.decoder),
        *speculative_problems(exp.speculative),
        *_dataset_problems(exp.dataset),
        *_measurement_problems(exp.measurement),
        *_traffic_problems(exp.traffic),
        *engine_problems(exp),
        *gpu_problems(exp.gpu, exp.device.value),
        *footprint_problems(exp.carbon, exp.chassis),
        *tracking_problems(exp.tracking),
    ]


def _quantization_problems(q: QuantizationConfig) -> list[str]:
    p: list[str] = []
    if q.load_in_4bit and q.load_in_8bit:
        p.append(
            f"{LOAD_IN_4BIT}=true and {LOAD_IN_8BIT}=true are exclusive "
            "(choose quantization=bnb-4bit or quantization=bnb-8bit)"
        )
    if not q.load_in_4bit:
        p.extend(
            f"quantization.{name}={show(getattr(q, name))} needs {LOAD_IN_4BIT}=true "
            "(use quantization=bnb-4bit, or leave it unset)"
            for name in _NEEDS_4BIT
            if getattr(q, name) is not None
        )
    return p


def _pytorch_problems(pt: PyTorchConfig) -> list[str]:
    p: list[str] = []
    if not pt.torch_compile:
        p.extend(
            f"pytorch.{name}={show(getattr(pt, name))} needs {TORCH_COMPILE}=true"
            for name in _NEEDS_COMPILE
            if getattr(pt, name) is not None
        )
    if pt.cache_implementation is not None and pt.use_cache is False:
        p.append(
            f"{CACHE_IMPLEMENTATION}={show(pt.cache_implementation)} needs "
            f"{USE_CACHE} to be true or unset (it is false)"
        )
    if pt.prompt_lookup_num_tokens is not None:
        n = pt.prompt_lookup_num_tokens
        p.append(
            f"{PROMPT_LOOKUP}={n} has moved to the speculative group: use "
            f"speculative=ngram speculative.num_tokens={n}"
        )
    if pt.max_memory is not None and not _is_memory_map(pt.max_memory):
        p.append(
            f"{MAX_MEMORY}={pt.max_memory} is not a memory map "
            "(allowed: {GPU index or cpu or disk: size}, e.g. {0:20GiB,cpu:64GiB})"
        )
    return p


def _decoder_problems(d: DecoderConfig) -> list[str]:
    if d.min_new_tokens is not None and d.min_new_tokens > d.max_new_tokens:
        return [
            f"{MIN_NEW_TOKENS}={d.min_new_tokens} must be <= {MAX_NEW_TOKENS}={d.max_new_tokens}"
        ]
    return []


def _dataset_problems(ds: DatasetConfig) -> list[str]:
    p: list[str] = []
    if ds.source == DatasetSource.synthetic and ds.input_tokens is None:
        p.append(f"{INPUT_TOKENS} is required for {DATASET_SOURCE}=synthetic")
    p.extend(chat_template_problems(ds))
    p.extend(scoring_problems(ds))
    if ds.source == DatasetSource.jsonl and not ds.path:
        p.append(f"{DATASET_PATH} is required for {DATASET_SOURCE}=jsonl")
    return p


def _measurement_problems(m: MeasurementConfig) -> list[str]:
    p: list[str] = []
    if m.energy == EnergySource.replay and not m.replay_trace:
        p.append(f"{REPLAY_TRACE} is required for {ENERGY}=replay")
    if m.replay_trace and m.energy != EnergySource.replay:
        p.append(f"{REPLAY_TRACE}={m.replay_trace} needs {ENERGY}=replay (it is {show(m.energy)})")
    return p


_OPEN_LOOP_NAMES = "poisson, gamma or constant"

# traffic.<knob> -> (the kinds it applies to, how to name them, how to set it when it is missing)
_TRAFFIC_KNOBS: dict[str, tuple[tuple[TrafficKind, ...], str, str]] = {
    RATE: (OPEN_LOOP, f"traffic={_OPEN_LOOP_NAMES}", "REQUESTS_PER_S, > 0"),
    BURSTINESS: ((TrafficKind.gamma,), "traffic=gamma", "SHAPE, > 0; 1 is Poisson"),
    MAX_CONCURRENCY: ((TrafficKind.concurrency,), "traffic=concurrency", "N, >= 1"),
    WARMUP_REQUESTS: (OPEN_LOOP, f"open-loop traffic ({_OPEN_LOOP_NAMES})", ""),
    DURATION: (OPEN_LOOP, f"open-loop traffic ({_OPEN_LOOP_NAMES})", ""),
    COOLDOWN_REQUESTS: (OPEN_LOOP, f"open-loop traffic ({_OPEN_LOOP_NAMES})", ""),
}


def _traffic_problems(t: TrafficConfig) -> list[str]:
    """A kind missing its parameter, a parameter its kind does not use, edges that leave nothing."""
    p: list[str] = []
    kind = show(t.kind)
    for dotted, (kinds, which, how) in _TRAFFIC_KNOBS.items():
        value = getattr(t, dotted.split(".")[-1])
        if value is None and t.kind in kinds and how:
            p.append(f"traffic={kind} needs {dotted} (set {dotted}={how})")
        elif value is not None and t.kind not in kinds:
            p.append(
                f"{dotted}={show(value)} applies to {which} only (it is traffic={kind}; "
                "leave it unset)"
            )
    if t.duration_s is not None and t.n_requests is not None:
        p.append(
            f"{DURATION}={show(t.duration_s)} and {N_REQUESTS}={t.n_requests} both size the "
            f"workload (set one; the other null: {N_REQUESTS}=null or {DURATION}=null)"
        )
    edges = (t.warmup_requests or 0) + (t.cooldown_requests or 0)
    n = planned_requests(t)
    if t.kind in OPEN_LOOP and n is not None and edges >= n:
        size = f"{N_REQUESTS}={n}" if t.n_requests is not None else f"{n} requests ({DURATION})"
        p.append(
            f"{WARMUP_REQUESTS}={show(t.warmup_requests)} and "
            f"{COOLDOWN_REQUESTS}={show(t.cooldown_requests)} leave no steady state of "
            f"{size} (their sum must be below it)"
        )
    return p


def _is_memory_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        (isinstance(k, int) or str(k) in ("cpu", "disk") or str(k).isdigit())
        and isinstance(v, (str, int))
        for k, v in value.items()
    )


def check_rules(exp: ExperimentConfig) -> None:
    problems = cross_field_problems(exp)
    if problems:
        raise ConfigError(problems)

"""Turn a composed Hydra config into a checked ``ExperimentConfig``.

Hydra and OmegaConf already reject misspelt keys, wrong types and unknown enum values while
composing. This module adds what they let through (keys added with ``+`` that no schema has,
missing required values) and the cross-field rules, and reports every violation at once, each
naming its keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from enum import Enum
from typing import Any, List

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from llem.config.schema import DatasetSource, EnergySource, ExperimentConfig
from llem.errors import ConfigError

# Fields whose value does not change what is measured: left out of the config hash so that repeats
# (and re-runs of the same point) group together.
_HASH_EXCLUDED = ("repeat", "dry_run", "sweep")

_FREE_FORM = {"passthrough_kwargs", "pytorch.max_memory"}


def _unknown_keys(node: Any, schema: Any, prefix: str) -> List[str]:
    """Keys present in the composed config that the dataclass schema does not declare."""
    if not dataclasses.is_dataclass(schema) or not isinstance(node, DictConfig):
        return []
    fields = {f.name: f for f in dataclasses.fields(schema)}
    found = []
    for key in node:
        full = f"{prefix}{key!s}"
        if key not in fields:
            allowed = ", ".join(sorted(fields))
            found.append(
                f"{full}: no such key (allowed keys under '{prefix[:-1] or 'root'}': {allowed})"
            )
            continue
        if full in _FREE_FORM:
            continue
        sub_default = fields[key].default_factory
        if sub_default is not dataclasses.MISSING:
            child = node._get_node(key)
            if isinstance(child, DictConfig):
                found.extend(_unknown_keys(child, sub_default(), f"{full}."))
    return found


def _missing_message(key: str) -> str:
    hints = {
        "model.name_or_path": "set model.name_or_path=<hub id or local directory>",
        "dataset.path": (
            "set dataset.path=<file.jsonl> (one JSON object per line with a 'prompt' field)"
        ),
    }
    return f"{key} is required but has no value ({hints.get(key, 'set it on the command line')})"


def to_experiment(cfg: DictConfig | ExperimentConfig) -> ExperimentConfig:
    """Build the dataclass tree and check every cross-field rule.

    Raises ``ConfigError`` listing every problem found.
    """
    if isinstance(cfg, ExperimentConfig):
        exp = cfg
    else:
        problems = _unknown_keys(cfg, ExperimentConfig(), "")
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


def cross_field_problems(exp: ExperimentConfig) -> List[str]:
    """Every violated rule, each naming its keys, the bad values and what is allowed."""
    p: List[str] = []
    q, pt, d, ds, m = exp.quantization, exp.pytorch, exp.decoder, exp.dataset, exp.measurement

    if q.load_in_4bit and q.load_in_8bit:
        p.append(
            "quantization.load_in_4bit=true and quantization.load_in_8bit=true are exclusive "
            "(choose quantization=bnb-4bit or quantization=bnb-8bit)"
        )
    if not q.load_in_4bit:
        for name in ("bnb_4bit_compute_dtype", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant"):
            value = getattr(q, name)
            if value is not None:
                p.append(
                    f"quantization.{name}={_show(value)} needs quantization.load_in_4bit=true "
                    "(use quantization=bnb-4bit, or leave it unset)"
                )
    if not pt.torch_compile:
        for name in ("torch_compile_mode", "torch_compile_backend"):
            value = getattr(pt, name)
            if value is not None:
                p.append(f"pytorch.{name}={value} needs pytorch.torch_compile=true")
    if pt.cache_implementation is not None and pt.use_cache is False:
        p.append(
            f"pytorch.cache_implementation={_show(pt.cache_implementation)} needs "
            "pytorch.use_cache to be true or unset (it is false)"
        )
    if d.min_new_tokens is not None and d.min_new_tokens > d.max_new_tokens:
        p.append(
            f"decoder.min_new_tokens={d.min_new_tokens} must be <= "
            f"decoder.max_new_tokens={d.max_new_tokens}"
        )

    def at_least(key: str, value: Any, low: float, strict: bool = False) -> None:
        if value is None:
            return
        bad = value <= low if strict else value < low
        if bad:
            op = ">" if strict else ">="
            p.append(f"{key}={value} is out of range (allowed: {op} {low:g})")

    at_least("pytorch.batch_size", pt.batch_size, 1)
    at_least("pytorch.num_beams", pt.num_beams, 1)
    at_least("pytorch.num_threads", pt.num_threads, 1)
    at_least("pytorch.no_repeat_ngram_size", pt.no_repeat_ngram_size, 1)
    at_least("pytorch.prompt_lookup_num_tokens", pt.prompt_lookup_num_tokens, 1)
    at_least("decoder.max_new_tokens", d.max_new_tokens, 1)
    at_least("decoder.min_new_tokens", d.min_new_tokens, 0)
    at_least("decoder.temperature", d.temperature, 0.0, strict=True)
    at_least("decoder.top_k", d.top_k, 0)
    at_least("decoder.repetition_penalty", d.repetition_penalty, 0.0, strict=True)
    for key, value in (("decoder.top_p", d.top_p), ("decoder.min_p", d.min_p)):
        if value is not None and not 0.0 <= value <= 1.0:
            p.append(f"{key}={value} is out of range (allowed: 0 to 1)")
    at_least("dataset.n_prompts", ds.n_prompts, 1)
    at_least("measurement.warmup", m.warmup, 0)
    at_least("measurement.idle_baseline_s", m.idle_baseline_s, 0.0)
    at_least("measurement.sample_hz", m.sample_hz, 0.0, strict=True)
    at_least("measurement.cooldown_s", m.cooldown_s, 0.0)
    at_least("measurement.min_window_s", m.min_window_s, 0.0)
    at_least("repeat", exp.repeat, 0)

    if ds.source == DatasetSource.synthetic and (ds.input_tokens is None or ds.input_tokens < 1):
        p.append(
            f"dataset.input_tokens={ds.input_tokens} must be a positive integer for "
            "dataset.source=synthetic"
        )
    if ds.source == DatasetSource.jsonl and not ds.path:
        p.append("dataset.path is required for dataset.source=jsonl")
    if m.energy == EnergySource.replay and not m.replay_trace:
        p.append("measurement.replay_trace is required for measurement.energy=replay")
    if m.replay_trace and m.energy != EnergySource.replay:
        p.append(
            f"measurement.replay_trace={m.replay_trace} needs measurement.energy=replay "
            f"(it is {m.energy.value})"
        )
    if exp.pytorch.num_beams not in (None, 1) and exp.pytorch.prompt_lookup_num_tokens is not None:
        p.append(
            "pytorch.prompt_lookup_num_tokens needs pytorch.num_beams unset or 1 "
            f"(it is {exp.pytorch.num_beams})"
        )

    mm = pt.max_memory
    if mm is not None:
        ok = isinstance(mm, dict) and all(
            (isinstance(k, int) or str(k) in ("cpu", "disk") or str(k).isdigit())
            and isinstance(v, (str, int))
            for k, v in mm.items()
        )
        if not ok:
            p.append(
                f"pytorch.max_memory={mm} is not a memory map "
                "(allowed: {GPU index or cpu or disk: size}, e.g. {0:20GiB,cpu:64GiB})"
            )

    from llem.backends import known_backends
    from llem.config.vllm import vllm_problems

    p.extend(vllm_problems(exp))

    if exp.backend is not None and exp.backend not in known_backends():
        p.append(f"backend={exp.backend}: unknown backend (allowed: {', '.join(known_backends())})")
    return p


def check_rules(exp: ExperimentConfig) -> None:
    problems = cross_field_problems(exp)
    if problems:
        raise ConfigError(problems)


def _show(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def plain(value: Any) -> Any:
    """A JSON-ready copy of a dataclass tree: enums become their values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def config_hash(exp: ExperimentConfig) -> str:
    """Identity of a configuration: the resolved config minus repeat, dry_run and sweep settings."""
    data = plain(exp)
    for key in _HASH_EXCLUDED:
        data.pop(key, None)
    blob = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]

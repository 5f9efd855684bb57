"""The numeric figures of result.json by dotted key (``latency.tpot_ms.p90``), read off the schema.

A search (``llem.sweep.search_spec``) names its objective and constraints by these keys: the
catalogue is every numeric field of ``RunResult``'s sections, walked through the dataclasses
(optional sections included, bounds ``*_uncertainty`` and bookkeeping left out), so a key that a
result can never hold is known before anything runs. ``value_at`` reads one from a result.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from functools import lru_cache
from typing import Any

from llem.result.model import RunResult

# Sections that describe the run rather than measure it (their numbers are settings or times).
_NOT_FIGURES = ("lifecycle", "sweep", "hardware", "traffic", "workload", "gpu", "validity")


def _unwrap(hint: Any) -> Any:
    """``X | None`` → ``X``; anything else as it is."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else hint
    return hint


def _walk(cls: type, prefix: str) -> list[str]:
    keys: list[str] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name.endswith("_uncertainty"):
            continue
        hint = _unwrap(hints[f.name])
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(hint):
            keys.extend(_walk(typing.cast(type, hint), key + "."))
        elif hint in (int, float):
            keys.append(key)
    return keys


@lru_cache(maxsize=1)
def numeric_keys() -> tuple[str, ...]:
    """Every numeric figure a result can hold, in schema order."""
    keys: list[str] = []
    hints = typing.get_type_hints(RunResult)
    for f in dataclasses.fields(RunResult):
        hint = _unwrap(hints[f.name])
        if f.name in _NOT_FIGURES or not dataclasses.is_dataclass(hint):
            continue
        keys.extend(_walk(typing.cast(type, hint), f.name + "."))
    return tuple(keys)


def needs_energy(key: str) -> bool:
    """Whether a figure comes from measured energy (joules, watts): null where none is measured."""
    leaf = key.rsplit(".", 1)[-1]
    return (
        leaf.endswith("_j")
        or leaf.startswith(("j_per_", "wh_per_"))
        or "power_w" in leaf
        or leaf.endswith(("_per_j", "_per_kj"))
        # carbon and energy cost are joules times a stated factor (capacity cost is not)
        or (key.startswith("footprint.") and leaf.startswith(ENERGY_FOOTPRINT))
    )


ENERGY_FOOTPRINT = ("carbon_g", "g_per_", "energy_cost", "energy_usd_")


def value_at(result: RunResult, key: str) -> float | None:
    """The figure at ``key`` in ``result``; None when the result does not hold a finite number
    there (a section that was not measured, a null figure)."""
    node: Any = result
    for part in key.split("."):
        if node is None:
            return None
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        return None
    value = float(node)
    return value if math.isfinite(value) else None


def why_missing(result: RunResult, key: str) -> str:
    """Why ``value_at(result, key)`` is None, in words for a trial record."""
    if result.status != "ok":
        err = result.error
        return f"the run {result.status}" + (f" ({err.type}: {err.message})" if err else "")
    for prefix in _prefixes(key):
        if prefix in result.null_reasons:
            return f"{key} is null: {result.null_reasons[prefix]}"
    section = key.split(".", 1)[0]
    if getattr(result, section, None) is None:
        return f"the result has no {section} section"
    if needs_energy(key) and result.energy.source == "unavailable":
        reason = result.energy.unavailable_reason or "no energy source"
        return f"{key} is null: energy unavailable ({reason})"
    return f"{key} is null in the result"


def _prefixes(key: str) -> list[str]:
    parts = key.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]

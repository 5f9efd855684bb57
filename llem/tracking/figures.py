"""What a tracker is given of one result.json: pure functions, no tracker imported.

Every numeric figure becomes a metric under its dotted key, which carries its unit as the field
does (``energy.total_j``, ``latency.ttft_ms.p50``, ``throughput.output_tokens_per_s``). A null
figure is no metric (never a 0): its reason from ``null_reasons`` becomes a tag ``null.<key>``.
The overrides and the whole composed configuration become parameters; status and validity tags.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llem.plain import Json

# top-level keys of result.json that are not figures: identity, configuration, position, reasons
NOT_FIGURES = ("schema_version", "config", "overrides", "sweep", "null_reasons", "error")
# MLflow's keys: alphanumerics, underscores, dashes, periods, spaces and slashes, 250 at most
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]")
KEY_MAX = 250
VALUE_MAX = 5000


def safe_key(key: str) -> str:
    """``key`` with the characters a tracker refuses replaced by ``_``, cut to 250."""
    return _KEY_UNSAFE.sub("_", key)[:KEY_MAX]


def _leaves(value: Json, prefix: str) -> Iterator[tuple[str, Json]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    else:
        yield prefix, value


def metrics(result: dict[str, Json]) -> dict[str, float]:
    """Every numeric leaf of ``result`` outside ``NOT_FIGURES``, by dotted key; booleans and
    nulls are not figures."""
    out: dict[str, float] = {}
    for top, value in result.items():
        if top in NOT_FIGURES:
            continue
        for key, leaf in _leaves(value, top):
            if isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
                out[safe_key(key)] = float(leaf)
    return out


def tags(result: dict[str, Json]) -> dict[str, str]:
    """Status, validity, identity and one ``null.<key>`` tag per null figure with its reason."""
    validity = result_section(result, "validity")
    valid = validity.get("energy_valid")
    out = {
        "llem.status": str(result.get("status")),
        "llem.energy_valid": "unknown" if valid is None else str(bool(valid)).lower(),
        "llem.config_hash": str(result.get("config_hash")),
        "llem.started_at": str(result.get("started_at")),
    }
    if problems := validity.get("problems"):
        listed = problems if isinstance(problems, list) else [problems]
        out["llem.validity_problems"] = " | ".join(map(str, listed))[:VALUE_MAX]
    if error := result.get("error"):
        if not isinstance(error, dict):  # schema 1 wrote the message alone (llem.result.migrate)
            error = {"type": "Error", "message": error}
        out["llem.error"] = f"{error.get('type')}: {error.get('message')}"[:VALUE_MAX]
    out.update(null_tags(result_section(result, "null_reasons")))
    return out


def result_section(result: dict[str, Json], key: str) -> dict[str, Json]:
    """``result[key]`` where it is an object; empty where it is absent or null."""
    section = result.get(key)
    return section if isinstance(section, dict) else {}


def null_tags(reasons: Mapping[str, object]) -> dict[str, str]:
    """One ``null.<key>`` tag per absent figure, its reason the value."""
    return {safe_key(f"null.{key}"): str(reason)[:VALUE_MAX] for key, reason in reasons.items()}


def params(result: dict[str, Json]) -> dict[str, str]:
    """The overrides (``override.<key>``) and the composed configuration (``config.<key>``)."""
    out: dict[str, str] = {}
    overrides = result.get("overrides")
    for override in overrides if isinstance(overrides, list) else []:
        key, _, value = str(override).lstrip("+~").partition("=")
        out[safe_key(f"override.{key}")] = value[:VALUE_MAX]
    for key, leaf in _leaves(result.get("config") or {}, ""):
        text = leaf if isinstance(leaf, str) else json.dumps(leaf)
        out[safe_key(f"config.{key}")] = text[:VALUE_MAX]
    return out

"""A configuration's identity: the hash that pools its repeats and that a sweep resumes by.

It is the hash of the resolved config less what does not change what is measured (repeat, dry_run,
the sweep and tracking settings) and less every engine section but the active one's; keys and
sections added after results were first written are left out while they are at their defaults,
so a sweep written before them keeps its hashes. ``legacy_config_hash`` is the hash llem wrote
before the inactive engines' sections were left out, which older sweeps still resume by.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from llem.config.engines import active_engine, engines
from llem.config.footprint import footprint_hash_defaults
from llem.config.schema import ExperimentConfig
from llem.plain import json_ready

# Fields whose value does not change what is measured: left out of the config hash so that repeats
# (and re-runs of the same point) group together.
_HASH_EXCLUDED = ("repeat", "dry_run", "sweep", "tracking")
# keys added after results were first written, with their defaults: left out of the hash while
# at them, so a sweep written before they existed still resumes (its points keep their hashes)
_HASH_NEW_AT_DEFAULT: dict[str, dict[str, Any]] = {
    "dataset": {"scorer": None, "task": None, "lm_eval_include": None, "num_fewshot": None},
    "measurement": {"boundary": "gpu"},
    "server": {"stream": None, "prompt_token_ids": None, "command": None, "pids": None},
    "speculative": {"method": "none", "num_tokens": 5, "ngram_size": None, "draft_model": None},
    **footprint_hash_defaults(),
}
# sections added whole after results were first written: left out while every key is at default
_HASH_NEW_SECTIONS = ("speculative", "chassis", "facility", "carbon", "cost")


def config_hash(exp: ExperimentConfig) -> str:
    """Identity of a configuration: the resolved config minus repeat, dry_run and sweep settings,
    and minus every engine section but the active one's (other engines' keys are refused away
    from their defaults, so those sections say nothing; adding an engine changes no hash)."""
    data = _hashed(exp)
    active = active_engine(exp).section
    for row in engines().values():
        if row.section != active:
            data.pop(row.section, None)
    return _digest(data)


def legacy_config_hash(exp: ExperimentConfig) -> str:
    """The hash that llem wrote before ``config_hash`` left out the inactive engines' sections
    (every section but an unconfigured server's): a sweep written then still resumes by it."""
    return _digest(_hashed(exp, legacy=True))


def _hashed(exp: ExperimentConfig, legacy: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = json_ready(exp)
    if legacy and data.get("server") == json_ready(ExperimentConfig())["server"]:
        data.pop("server")  # no server configured: the hash of configs from before server.*
    for key in _HASH_EXCLUDED:
        data.pop(key, None)
    if not any(v is not None for v in data.get("gpu", {}).values()):
        data.pop("gpu", None)  # a GPU left as it is: the hash of configs from before gpu.*
    for section, defaults in _HASH_NEW_AT_DEFAULT.items():
        for key, default in defaults.items():
            if key in data.get(section, {}) and data[section][key] == default:
                del data[section][key]
    for section in _HASH_NEW_SECTIONS:
        if data.get(section) == {}:
            del data[section]
    return data


def _digest(data: dict[str, Any]) -> str:
    blob = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]

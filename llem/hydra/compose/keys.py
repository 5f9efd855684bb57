"""A key the schema does not declare, explained: ``decoder.temprature: no such key; did you mean
decoder.temperature? (allowed keys under 'decoder': ...)``.

The one wording for an unknown key, whether it came as ``decoder.temprature=0.7`` (Hydra: "Could
not override"), ``+decoder.temprature=0.7`` or inside a study file.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from llem.config.knobs import walk_schema
from llem.config.schema import ExperimentConfig
from llem.config.validate import group_hint


def schema_keys(parent: str) -> list[str] | None:
    """The keys the schema declares under ``parent`` ('' for the root; None if not a section)."""
    node: Any = ExperimentConfig
    for part in [p for p in parent.split(".") if p]:
        fields = (
            {f.name: f for f in dataclasses.fields(node)} if dataclasses.is_dataclass(node) else {}
        )
        factory = fields[part].default_factory if part in fields else dataclasses.MISSING
        if factory is dataclasses.MISSING:
            return None
        node = factory()
    if not dataclasses.is_dataclass(node):
        return None
    return [f.name for f in dataclasses.fields(node)]


def closest_key(key: str) -> str | None:
    """The declared key ``key`` most likely meant: a close name in the same section, else the
    same (or a close) name in another section (``decoder.batch_size`` -> ``pytorch.batch_size``)."""
    parent, _, name = key.rpartition(".")
    near = difflib.get_close_matches(name, schema_keys(parent) or [], n=1, cutoff=0.6)
    if near:
        return f"{parent}.{near[0]}" if parent else near[0]
    everywhere = {k: k.rpartition(".")[2] for k, _, _ in walk_schema(ExperimentConfig)}
    same = [k for k, leaf in everywhere.items() if leaf == name]
    if len(same) == 1:
        return same[0]
    near = difflib.get_close_matches(name, sorted(set(everywhere.values())), n=1, cutoff=0.8)
    hits = [k for k, leaf in everywhere.items() if near and leaf == near[0]]
    return hits[0] if len(hits) == 1 else None


def no_such_key(key: str) -> str:
    """``key: no such key; did you mean K? (allowed keys under 'parent': ...)``."""
    parent = key.rpartition(".")[0]
    allowed = sorted(schema_keys(parent) or [])
    guess = closest_key(key)
    listed = f" (allowed keys under '{parent or 'root'}': {', '.join(allowed)})" if allowed else ""
    hint = group_hint(key) or (f"; did you mean {guess}?" if guess else "")
    return f"{key}: no such key" + hint + listed


def first_unknown_key(dotted: str) -> str | None:
    """The shortest prefix of ``dotted`` the schema does not declare (``decoder.foo`` for
    ``decoder.foo.bar``); None when every part is declared or a part is not a schema section."""
    parts = dotted.split(".")
    if parts[0] == "hydra":
        return None
    for i, part in enumerate(parts):
        allowed = schema_keys(".".join(parts[:i]))
        if allowed is None:
            return None
        if part not in allowed:
            return ".".join(parts[: i + 1])
    return None

"""Plain data from dataclass trees: what ``json.dumps`` takes, for result.json and the config's
hash and dump alike."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, TypeAlias

#: what ``json.loads`` gives (and ``yaml.safe_load`` of a plain file): data still to be checked
Json: TypeAlias = str | int | float | bool | None | list["Json"] | dict[str, "Json"]
#: one value of a flat record (a knob, a results.csv cell)
Scalar: TypeAlias = str | int | float | bool | None


def json_ready(value: Any) -> Any:
    """A JSON-ready copy of a dataclass tree: dataclasses become dicts (fields in order), enums
    their values, tuples lists, dict keys strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: json_ready(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value

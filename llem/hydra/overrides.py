"""Command-line overrides, read with Hydra's own parser: the one place llem looks inside them.

``decoder.temperature=0.7``, ``+backend=pytorch``, ``~key``, ``model@pkg=hf`` mean here exactly what
they mean to Hydra: the sweeper's planning, its progress labels and the report's knob columns all
ask this module for an override's key and typed value. It is also the one place that builds
Hydra's ``OverridesParser`` (``hydra_parser``): composition, studies and the sweeper's grid use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from llem.errors import ConfigError

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Override

    from llem.plain import Scalar


@dataclass(frozen=True)
class ParsedOverride:
    text: str  # as written
    key: str  # without +, ++, ~ and without @package: ``pytorch.batch_size``, ``decoder``
    value: Any  # typed as Hydra types it (4, 0.001, True, "greedy"); None for a deletion
    value_text: str | None  # the value as written (``1e-3``); None for a deletion
    deletion: bool
    sweep: bool  # a grid (``1,2``, ``range(3)``, ``choice(...)``) rather than one value

    @property
    def is_hydra(self) -> bool:
        return self.key == "hydra" or self.key.startswith(("hydra.", "hydra/"))


@lru_cache(maxsize=1)
def _plain_parser() -> OverridesParser:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def hydra_parser(config_loader: ConfigLoader | None = None) -> OverridesParser:
    """Hydra's ``OverridesParser``; given a sweep's config loader, ``glob()`` can list groups."""
    if config_loader is None:
        return _plain_parser()
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create(config_loader=config_loader)


def parse_grid(
    overrides: Sequence[str], config_loader: ConfigLoader | None = None
) -> list[Override]:
    """Hydra's own ``Override`` objects for a sweep's command line (grids left unexpanded);
    raises what Hydra raises for a malformed one."""
    return list(hydra_parser(config_loader).parse_overrides(list(overrides)))


@lru_cache(maxsize=4096)
def parse_one(text: str) -> ParsedOverride:
    """One override; a malformed one is a ``ConfigError`` (exit 2) naming it."""
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    try:
        (o,) = _plain_parser().parse_overrides([text])
    except HydraException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"override {text!r} cannot be parsed: {first}") from None
    deletion = o.type == OverrideType.DEL
    sweep = (not deletion) and o.is_sweep_override()
    value_text = None
    if not deletion and o.value_type is not None:
        value_text = o.get_value_string()
    value = None
    if not deletion and not sweep and o.value_type is not None:
        value = o.value()
    return ParsedOverride(
        text=text,
        key=o.key_or_group,
        value=value,
        value_text=value_text,
        deletion=deletion,
        sweep=sweep,
    )


def parse(overrides: Iterable[str]) -> list[ParsedOverride]:
    return [parse_one(str(o)) for o in overrides]


def key_of(text: str) -> str:
    """``+decoder.top_k=5`` → ``decoder.top_k``; ``decoder=greedy`` → ``decoder``."""
    return parse_one(text).key


def swept_keys(jobs: Sequence[Sequence[str]]) -> list[str]:
    """Override keys whose value differs between jobs (or that some jobs lack), in order."""
    values: dict[str, set[str]] = {}
    present: dict[str, int] = {}
    for job in jobs:
        parsed = parse(job)
        for key in {p.key for p in parsed}:
            present[key] = present.get(key, 0) + 1
        for p in parsed:
            values.setdefault(p.key, set()).add(p.value_text or "")
    return [k for k, v in values.items() if len(v) > 1 or present[k] < len(jobs)]


def without_key(overrides: Sequence[str], key: str) -> list[str]:
    return [o for o in overrides if key_of(o) != key]


def knob_values(overrides: Iterable[str]) -> dict[str, Scalar]:
    """``["+pytorch.batch_size=4", "decoder=greedy"]`` → ``{"pytorch.batch_size": 4, ...}``.

    Hydra's own keys and deletions are left out; a list or dict value stays as written.
    """
    out: dict[str, Scalar] = {}
    for text in overrides:
        try:
            p = parse_one(str(text).strip())
        except ConfigError:
            continue
        if p.deletion or p.is_hydra or not p.key:
            continue
        out[p.key] = p.value_text if isinstance(p.value, (list, dict)) or p.sweep else p.value
    return out

"""Composing the job configs of many grid points without composing each one from scratch.

Hydra composes a job config in two steps: it builds the defaults list from the overrides that
choose config-group options (``decoder=creative``, ``+backend=pytorch``) and merges those files;
then it applies the remaining value overrides (``pytorch.batch_size=4``) to the merged config, in
order. Only the first step is expensive (it reads and merges every config file), and in a grid it
depends on a handful of group choices. So the first step runs once per distinct set of group
choices (through Hydra's own ``load_sweep_config``), and each point gets a copy with its value
overrides applied by Hydra's own override code, which is what Hydra does after the first step.

Overrides are parsed with Hydra's ``OverridesParser``; a key is a group exactly when Hydra's config
loader lists it as one. Anything this shortcut cannot reproduce exactly (dict values, which Hydra
may treat either way; a Hydra without the override function) is composed from scratch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, open_dict


def _hydra_apply() -> Callable[[list[Any], DictConfig], None] | None:
    """Hydra's step two (``ConfigLoaderImpl._apply_overrides_to_config``), if this Hydra has it."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
    except ImportError:  # pragma: no cover - a Hydra that moved it: compose every point
        return None
    return getattr(ConfigLoaderImpl, "_apply_overrides_to_config", None)


class PointComposer:
    """Job configs (without the ``hydra`` node) of grid points, composed as Hydra would."""

    def __init__(self, config_loader: Any, master_config: DictConfig) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self._loader = config_loader
        self._master = master_config
        self._parser = OverridesParser.create(config_loader=config_loader)
        self._apply = _hydra_apply()
        self._groups: dict[str, list[str]] = {}
        self._bases: dict[tuple[str, ...], DictConfig] = {}
        self._parsed: dict[str, Any] = {}  # override string -> Hydra's Override (points share many)
        self.full_compositions = 0  # how many points took Hydra's whole composition

    def _is_group(self, key: str) -> bool:
        parent, _, name = key.rpartition("/")
        if parent not in self._groups:
            try:
                self._groups[parent] = list(self._loader.list_groups(parent))
            except Exception:
                self._groups[parent] = []
        return name in self._groups[parent]

    def _parse(self, override: str) -> Any:
        if override not in self._parsed:
            self._parsed[override] = self._parser.parse_overrides([override])[0]
        return self._parsed[override]

    def _full(self, overrides: list[str]) -> DictConfig:
        self.full_compositions += 1
        cfg = self._loader.load_sweep_config(self._master, list(overrides))
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg

    def compose(self, overrides: list[str]) -> DictConfig:
        """The job config of one point; raises whatever Hydra raises for bad overrides."""
        parsed = [self._parse(o) for o in overrides]
        if self._apply is None or any(isinstance(o.value(), dict) for o in parsed):
            return self._full(overrides)
        groups = [o for o in parsed if self._is_group(o.key_or_group)]
        values = [o for o in parsed if not self._is_group(o.key_or_group)]
        key = tuple(o.input_line for o in groups)
        if key not in self._bases:
            self._bases[key] = self._full(list(key))
        cfg = copy.deepcopy(self._bases[key])
        self._apply(values, cfg)
        return cfg

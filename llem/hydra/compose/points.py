"""Composing the configs of many grid points without composing each one from scratch.

Hydra composes a job config in two steps: it builds the defaults list from the overrides that
choose config-group options (``decoder=creative``, ``+backend=pytorch``) and merges those files;
then it applies the remaining value overrides (``pytorch.batch_size=4``) to the merged config, in
order, and records the overrides in the ``hydra`` node. Only the first step is expensive (it reads
and merges every config file), and in a grid it depends on a handful of group choices. So the
first step runs once per distinct set of group choices (through Hydra's own
``load_sweep_config``), and each point gets a copy with its value overrides applied by Hydra's own
override code, which is what Hydra does after the first step.

``compose`` gives a point's job config (no ``hydra`` node: what planning validates);
``job_config`` gives the whole config Hydra's launcher would hand the job (``hydra`` node
included: its overrides, ``override_dirname``), so an in-process sweep runs each point on the
config planning already composed.

Overrides are parsed with Hydra's ``OverridesParser``; a key is a group exactly when Hydra's config
loader lists it as one. Anything this shortcut cannot reproduce exactly (dict values, which Hydra
may treat either way; a Hydra without the override function; ``hydra.searchpath``) is composed
from scratch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf, open_dict

from llem.hydra.overrides import hydra_parser

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader
    from hydra.core.override_parser.types import Override


def _hydra_apply() -> Callable[[list[Override], DictConfig], None] | None:
    """Hydra's step two (``ConfigLoaderImpl._apply_overrides_to_config``), if this Hydra has it."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
    except ImportError:  # pragma: no cover - a Hydra that moved it: compose every point
        return None
    return getattr(ConfigLoaderImpl, "_apply_overrides_to_config", None)


def _override_dirname(app_overrides: list[Override], cfg: DictConfig) -> str:
    """``hydra.job.override_dirname`` as Hydra computes it from the job's own overrides."""
    from hydra._internal.config_loader_impl import get_overrides_dirname

    conf = cfg.hydra.job.config.override_dirname
    return str(
        get_overrides_dirname(
            overrides=app_overrides,
            kv_sep=conf.kv_sep,
            item_sep=conf.item_sep,
            exclude_keys=conf.exclude_keys,
        )
    )


def _written(parsed: list[Override]) -> tuple[str, ...]:
    """The overrides as written (Hydra's parser keeps each one's ``input_line``)."""
    lines = tuple(o.input_line for o in parsed)
    assert all(line is not None for line in lines)
    return tuple(line for line in lines if line is not None)


def _without_hydra(cfg: DictConfig) -> DictConfig:
    job = copy.deepcopy(cfg)
    with open_dict(job):
        del job["hydra"]
    return job


class PointComposer:
    """Configs of grid points, composed as Hydra would."""

    def __init__(self, config_loader: ConfigLoader, master_config: DictConfig) -> None:
        self._loader = config_loader
        self._master = master_config
        self._parser = hydra_parser(config_loader)
        self._apply = _hydra_apply()
        self._groups: dict[str, list[str]] = {}
        self._bases: dict[tuple[str, ...], DictConfig] = {}  # whole configs, hydra node included
        self._job_bases: dict[tuple[str, ...], DictConfig] = {}  # the same without it
        self._parsed: dict[str, Override] = {}  # override string -> Hydra's (points share many)
        self.full_compositions = 0  # how many configs took Hydra's whole composition

    def _is_group(self, key: str) -> bool:
        parent, _, name = key.rpartition("/")
        if parent not in self._groups:
            try:
                self._groups[parent] = list(self._loader.list_groups(parent))
            except Exception:
                self._groups[parent] = []
        return name in self._groups[parent]

    def _parse(self, override: str) -> Override:
        if override not in self._parsed:
            self._parsed[override] = self._parser.parse_overrides([override])[0]
        return self._parsed[override]

    def _full(self, overrides: list[str]) -> DictConfig:
        """Hydra's whole composition of one job (what its launchers call)."""
        self.full_compositions += 1
        return self._loader.load_sweep_config(self._master, list(overrides))

    def _split(self, overrides: list[str]) -> tuple[list[Override], list[Override]] | None:
        """(group overrides, value overrides), or None when the shortcut cannot be exact."""
        parsed = [self._parse(o) for o in overrides]
        if self._apply is None or any(
            isinstance(o.value(), dict) or o.key_or_group == "hydra.searchpath" for o in parsed
        ):
            return None
        groups = [o for o in parsed if self._is_group(o.key_or_group)]
        values = [o for o in parsed if not self._is_group(o.key_or_group)]
        return groups, values

    def _base(self, groups: list[Override]) -> DictConfig:
        key = _written(groups)
        if key not in self._bases:
            self._bases[key] = self._full(list(key))
        return self._bases[key]

    def compose(self, overrides: list[str]) -> DictConfig:
        """The job config of one point; raises whatever Hydra raises for bad overrides."""
        split = self._split(overrides)
        if split is None:
            return _without_hydra(self._full(overrides))
        groups, values = split
        key = _written(groups)
        if key not in self._job_bases:
            self._job_bases[key] = _without_hydra(self._base(groups))
        cfg = copy.deepcopy(self._job_bases[key])
        assert self._apply is not None
        self._apply(values, cfg)
        return cfg

    def job_config(self, overrides: list[str]) -> DictConfig:
        """The whole config of one job, ``hydra`` node included, equal to what Hydra's own
        ``load_sweep_config`` composes for it (a launcher's per-job composition)."""
        split = self._split(overrides)
        if split is None:
            return self._full(overrides)
        groups, values = split
        cfg = copy.deepcopy(self._base(groups))
        assert self._apply is not None
        self._apply(values, cfg)
        # The overrides as Hydra records them: the sweep's own hydra overrides, then the job's.
        parsed = [self._parse(str(o)) for o in self._master.hydra.overrides.hydra]
        parsed += [self._parse(o) for o in overrides]
        app = [o for o in parsed if not o.is_hydra_override()]
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.hydra = [o.input_line for o in parsed if o.is_hydra_override()]
            cfg.hydra.overrides.task = [o.input_line for o in app]
            cfg.hydra.job.override_dirname = _override_dirname(app, cfg)
        OmegaConf.copy_cache(from_config=self._master, to_config=cfg)
        return cfg

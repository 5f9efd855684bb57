"""Settling a configuration before a run: validated, with its backend named or detected, and
its config hash computed once for everything that writes it."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from llem.backends import detect_default_backend
from llem.config.config_hash import config_hash
from llem.config.schema import ExperimentConfig
from llem.config.validate import to_experiment
from llem.errors import ConfigError


@dataclass
class Prepared:
    """A checked configuration, with the backend settled (named in the config, or detected)."""

    exp: ExperimentConfig
    backend_chosen_by: str  # config | detected
    config_hash: str = ""  # of ``exp`` with its backend settled (``config_hash``)

    def __post_init__(self) -> None:
        self.config_hash = config_hash(self.exp)


def prepare(cfg: DictConfig | ExperimentConfig | Prepared) -> Prepared:
    """Validate a composed config and settle the backend (detected when none is named); a
    configuration already prepared is returned as it is."""
    if isinstance(cfg, Prepared):
        return cfg
    exp = to_experiment(cfg)
    if exp.backend is not None:
        return Prepared(exp, "config")
    exp.backend = detect_default_backend()
    if exp.backend is None:
        raise ConfigError("backend: no backend is usable here (install transformers)")
    return Prepared(exp, "detected")

"""Settling a configuration before a run: validated, with its backend named or detected."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from llem.backends import detect_default_backend
from llem.config.schema import ExperimentConfig
from llem.config.validate import to_experiment
from llem.errors import ConfigError


@dataclass
class Prepared:
    """A checked configuration, with the backend settled (named in the config, or detected)."""

    exp: ExperimentConfig
    backend_chosen_by: str  # config | detected


def prepare(cfg: DictConfig | ExperimentConfig) -> Prepared:
    """Validate a composed config and settle the backend (detected when none is named)."""
    exp = to_experiment(cfg)
    if exp.backend is not None:
        return Prepared(exp, "config")
    exp.backend = detect_default_backend()
    if exp.backend is None:
        raise ConfigError("backend: no backend is usable here (install transformers)")
    return Prepared(exp, "detected")

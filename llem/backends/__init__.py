"""Backends: which module drives each engine, default detection, and building one for a run.

Engine names and the package each needs are configuration (``llem.config.engines``); the shared
types (``Prompt``, ``BatchOutput``, ``LoadedModel``, the ``Backend`` protocol) are in
``llem.backends.types``.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from llem.backends.types import Backend, BackendSections
from llem.config.architectures import run_decoder
from llem.config.engines import ENGINE_PACKAGES, PYTORCH
from llem.config.pytorch import Batching
from llem.config.schema import ExperimentConfig
from llem.config.traffic import TrafficKind

# engine name -> the module that drives it (each has ``create_backend(sections)``)
_DRIVERS: dict[str, str] = {
    "pytorch": "llem.backends.pytorch",
    "vllm": "llem.backends.vllm",
}


def detect_default_backend() -> str | None:
    """The backend used when none is named: the first whose package is importable."""
    for name, package in ENGINE_PACKAGES.items():
        if importlib.util.find_spec(package) is not None:
            return name
    return None


def run_seed(exp: ExperimentConfig) -> int:
    """The seed of this run (``lifecycle.seed``): ``seed + repeat`` with a sampling decoder, so
    repeats sample differently; ``seed`` with a greedy one."""
    return exp.seed + exp.repeat if exp.decoder.do_sample else exp.seed


def serves(exp: ExperimentConfig, name: str | None = None) -> bool:
    """Whether the run serves a workload (``Backend.serve``) rather than ``generate`` batches:
    its traffic (``traffic.kind``) is not offline, or it is a PyTorch run with
    ``pytorch.batching=continuous``. vLLM's offline runs keep calling ``generate``."""
    engine = name or exp.backend or PYTORCH
    return exp.traffic.kind != TrafficKind.offline or (
        engine == PYTORCH and exp.pytorch.batching == Batching.continuous
    )


def sections(exp: ExperimentConfig, name: str | None = None) -> BackendSections[Any]:
    """The sections the ``name`` backend (default: ``exp.backend``) is built with."""
    engine = name or exp.backend or PYTORCH
    return BackendSections(
        engine=getattr(exp, engine),
        model=exp.model,
        decoder=run_decoder(exp.model, exp.decoder, engine == PYTORCH and serves(exp, engine)),
        quantization=exp.quantization,
        passthrough_kwargs=dict(exp.passthrough_kwargs),
        seed=exp.seed,
        run_seed=run_seed(exp),
        save_outputs=exp.measurement.save_outputs,
        serving=serves(exp, engine),
    )


def create_backend(exp: ExperimentConfig) -> Backend[Any]:
    """The backend ``exp`` names (pytorch when none is named), built with its sections."""
    name = exp.backend or PYTORCH
    module = importlib.import_module(_DRIVERS[name])
    backend: Backend[Any] = module.create_backend(sections(exp, name))
    return backend

"""Backends: which module drives each engine, default detection, and building one for a run.

Each engine's row (name, section, driver module, packages) is configuration
(``llem.config.engines``): nothing here names an engine. The shared
types (``Prompt``, ``BatchOutput``, ``LoadedModel``, the ``Backend`` protocol) are in
``llem.vocabulary``.

Imports llem.hydra and below; writes model copies in llem's cache, a server's log and metrics.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from llem.config.architectures import run_decoder
from llem.config.dataset import scores
from llem.config.engines import Engine, active_engine, engine, engines
from llem.config.schema import ExperimentConfig
from llem.config.traffic import TrafficKind
from llem.vocabulary.engine import Backend, BackendSections


def detect_default_backend() -> str | None:
    """The backend used when none is named: the first in the engine table whose package is
    importable (``llem.config.engines``)."""
    for row in engines().values():
        if importlib.util.find_spec(row.packages[0]) is not None:
            return row.name
    return None


def run_seed(exp: ExperimentConfig) -> int:
    """The seed of this run (``lifecycle.seed``): ``seed + repeat`` with a sampling decoder, so
    repeats sample differently; ``seed`` with a greedy one."""
    return exp.seed + exp.repeat if exp.decoder.do_sample else exp.seed


def _row(exp: ExperimentConfig, name: str | None) -> Engine:
    return engine(name) if name else active_engine(exp)


def serves(exp: ExperimentConfig, name: str | None = None) -> bool:
    """Whether the run serves a workload (``Backend.serve``) rather than ``generate`` batches:
    its traffic (``traffic.kind``) is not offline, or its engine serves offline traffic too
    (``Engine.offline_serves``: PyTorch with ``pytorch.batching=continuous``). vLLM's offline runs
    keep calling ``generate``."""
    row = _row(exp, name)
    return exp.traffic.kind != TrafficKind.offline or row.offline_serves(getattr(exp, row.section))


def sections(
    exp: ExperimentConfig, name: str | None = None, run_dir: Path | None = None
) -> BackendSections[Any]:
    """The sections the ``name`` backend (default: ``exp.backend``) is built with, for a run
    into ``run_dir`` (None: no run, as in pre-flight)."""
    row = _row(exp, name)
    drops_min_tokens = row.serve_drops_min_new_tokens and serves(exp, row.name)
    return BackendSections(
        engine=getattr(exp, row.section),
        model=exp.model,
        decoder=run_decoder(exp.model, exp.decoder, drops_min_tokens),
        quantization=exp.quantization,
        passthrough_kwargs=dict(exp.passthrough_kwargs),
        seed=exp.seed,
        run_seed=run_seed(exp),
        # a scored run keeps its texts for scoring after the window (llem.runner.quality)
        save_outputs=exp.measurement.save_outputs or scores(exp.dataset),
        serving=serves(exp, row.name),
        speculative=exp.speculative,
        run_dir=run_dir,
    )


def create_backend(exp: ExperimentConfig, run_dir: Path | None = None) -> Backend[object]:
    """The backend ``exp`` names (the default when none is named), built with its sections by
    the driver module of its row in the engine table, for a run into ``run_dir``."""
    row = active_engine(exp)
    module = importlib.import_module(row.driver)
    backend: Backend[object] = module.create_backend(sections(exp, row.name, run_dir))
    return backend

"""TRANSITIONAL: one process-wide ``Runner`` for callers that do not hold their own yet.

``llem.main`` and ``llem.sweep.sweeper`` call ``run``, ``release_all`` and ``get_backend`` here
until they are re-wired to hold a ``Runner`` (``Runner(live_display=...)``, ``runner.run(...)``,
``runner.close()``); then this module goes. Until then a sweep's live display is not known here,
so per-batch progress may draw on a terminal the display owns.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from llem.backends import create_backend
from llem.config.schema import ExperimentConfig
from llem.result import RunResult, SweepPosition
from llem.runner.runner import Runner
from llem.runner.summary import summary_line

__all__ = ["get_backend", "release_all", "run", "run_once", "summary_line"]

_RUNNER = Runner()


def run_once(
    cfg: DictConfig | ExperimentConfig,
    run_dir: Path,
    overrides: list[str] | None = None,
    reuse_model: bool = False,
    sweep: SweepPosition | None = None,
) -> RunResult:
    """``Runner.run`` on the process-wide runner (a kept model survives to the next call)."""
    return _RUNNER.run(cfg, run_dir, overrides, reuse_model=reuse_model, sweep=sweep)


run = run_once


def release_all() -> None:
    """Free the model the process-wide runner kept for reuse."""
    _RUNNER.close()


class _LoadKeys:
    """What the sweep planner asks of a backend by name: the load key of a configuration."""

    def load_key(self, exp: ExperimentConfig, device: str) -> str:
        return create_backend(exp).load_key(device)


def get_backend(name: str) -> _LoadKeys:
    return _LoadKeys()

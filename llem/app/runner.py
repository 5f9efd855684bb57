"""The run layer as the entrypoint uses it: ``Runner``, ``prepare`` and ``summary_line``.

The entrypoint needs exactly this of a run:

    runner = Runner(live_display=False)       # one per command; holds what outlives a run
    result = runner.run(cfg, run_dir, overrides=None, reuse_model=False, sweep=None)  # RunResult
    runner.live_display = True                # the sweep's live display holds the terminal
    runner.close()                            # release what it kept (a model kept for reuse)
    prepare(cfg).exp, summary_line(result, run_dir)

``LifecycleRunner`` gives today's ``llem.lifecycle`` that interface. It keeps no state of its own
beyond ``live_display``: today a model kept for reuse lives in ``llem.sweep.reuse``, and a taken
terminal reaches the run's batch line as a standard error that is not a terminal.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from llem import lifecycle
from llem.result import RunResult, SweepPosition
from llem.sweep import reuse

prepare = lifecycle.prepare
summary_line = lifecycle.summary_line


class _NotATerminal:
    """A stream that writes where ``stream`` writes but is no terminal (so nothing draws on it)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class LifecycleRunner:
    """Runs configurations through ``llem.lifecycle``, one after another, in this process."""

    def __init__(self, live_display: bool = False) -> None:
        self.live_display = live_display

    def run(
        self,
        cfg: DictConfig,
        run_dir: Path,
        overrides: list[str] | None = None,
        reuse_model: bool = False,
        sweep: SweepPosition | None = None,
    ) -> RunResult:
        """Run one configuration into ``run_dir`` (raises as ``llem.lifecycle.run`` does)."""
        quiet = contextlib.redirect_stderr(_NotATerminal(sys.stderr))
        with quiet if self.live_display else contextlib.nullcontext():
            return lifecycle.run(cfg, run_dir, overrides, reuse_model=reuse_model, sweep=sweep)

    def close(self) -> None:
        """Release a model kept loaded for the next point of a sweep."""
        reuse.release_all()


Runner = LifecycleRunner

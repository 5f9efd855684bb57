"""How a job ended, and what a sweep tells the command that started it.

The task function returns a ``JobOutcome`` for every job (a launcher's worker process pickles it
back); the sweeper keeps one per grid point. llem's entrypoint hands the sweeper a
``SweepListener`` through the task function Hydra gives the sweeper (``listener_of``): the sweep
reports its directory, its lock, the live display and its outcomes there, and nothing is shared
through module globals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from omegaconf import DictConfig

from llem.sweep.lock import SweepLock

if TYPE_CHECKING:
    from hydra.types import TaskFunction

LISTENER_ATTRIBUTE = "sweep_listener"


@dataclass
class JobOutcome:
    """How one job or grid point ended: ok | failed | skipped | done | interrupted | dry_run."""

    status: str
    overrides: list[str] = field(default_factory=list)
    index: int | None = None  # grid index (sweeps only)
    label: str = ""
    error: str | None = None
    run_dir: Path | None = None


class SweepListener(Protocol):
    """What the command that started a sweep wants to hear from it."""

    def sweep_started(self, sweep_dir: Path, lock: SweepLock | None) -> None:
        """The sweep writes into ``sweep_dir``; the listener releases ``lock`` when it is done
        (after the end-of-sweep report). A dry run takes no lock."""

    def sweep_ready(self, config: DictConfig) -> None:
        """The sweep is planned and checked and no point has run yet: the listener's own checks
        of the sweep's ``config`` run here, once (the tracker answers). An ``LlemError`` raised
        here stops the sweep before any point runs, and nothing is left in its directory."""

    def terminal_taken(self, taken: bool) -> None:
        """A live display holds the terminal (``True``) or has let it go (``False``)."""

    def sweep_finished(self, outcomes: list[JobOutcome], preflight_failed: bool) -> None:
        """Every grid point's outcome (or, for a dry run, whether a point failed pre-flight)."""


def listener_of(task_function: TaskFunction) -> SweepListener | None:
    """The listener llem's entrypoint attached to its task function (None under another app)."""
    return getattr(task_function, LISTENER_ATTRIBUTE, None)

"""What the entrypoint and llem's sweeper share within one process: a typed record of the command.

The entrypoint resets it before each command; the task function and the sweeper fill it in; the
entrypoint reads it at the end to choose the exit code (and the Python API to find the result).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path


@dataclass
class Outcome:
    """How one job or grid point ended: ok | failed | skipped | done | interrupted."""

    status: str
    overrides: list[str] = field(default_factory=list)
    index: int | None = None  # grid index (sweeps only)
    label: str = ""
    error: str | None = None
    run_dir: Path | None = None


@dataclass
class CommandState:
    task_started: bool = False
    multirun: bool = False
    sweep_dir: Path | None = None
    # Outcomes reported by the task function, job by job (in this process only).
    job_outcomes: list[Outcome] = field(default_factory=list)
    # Outcomes of every grid point, set by llem's sweeper (covers jobs run in other processes).
    sweep_outcomes: list[Outcome] | None = None
    dry_run_preflight_failed: bool = False
    # A live sweep display is drawn on the terminal (runs keep their own progress off it).
    live_display: bool = False
    # What stopped a single run (raised by the entrypoint once Hydra has returned).
    error: BaseException | None = None

    def reset(self) -> None:
        """Start a new command: forget everything the previous one recorded."""
        fresh = CommandState()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))

    def outcomes(self) -> list[Outcome]:
        return self.sweep_outcomes if self.sweep_outcomes is not None else self.job_outcomes

    def any_failed(self) -> bool:
        return any(o.status == "failed" for o in self.outcomes())


STATE = CommandState()

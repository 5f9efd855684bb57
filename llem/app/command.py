"""What one command line records while Hydra runs it, and the exit code that follows.

``main()`` builds a ``Command`` per command line and hands it to the task function (a closure),
never through a module global. The task function reports each job here; llem's sweeper, which
finds the command on the task function Hydra gives it, reports its directory, its lock, its live
display and every point's outcome here (``Command`` is the sweep's ``SweepListener``).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from llem.errors import EXIT_OK, EXIT_PREFLIGHT, EXIT_SWEEP_FAILED
from llem.runner import Runner
from llem.sweep.lock import SweepLock
from llem.sweep.outcomes import JobOutcome


class Command:
    """One command line's record: the runner, how each job ended, the sweep's outcomes."""

    def __init__(self, runner: Runner | None = None, argv: list[str] | None = None) -> None:
        self.argv = list(argv or [])  # the command line, without the program name
        self.runner = runner if runner is not None else Runner()
        self.task_started = False
        self.multirun = False
        self.sweep_dir: Path | None = None
        self.job_outcomes: list[JobOutcome] = []  # reported by the task function, in this process
        self.sweep_outcomes: list[JobOutcome] | None = None  # every grid point, from the sweeper
        self.dry_run_preflight_failed = False
        self.error: BaseException | None = None  # what stopped a single run, raised after Hydra
        self._lock: SweepLock | None = None
        self.said: set[str] = set()  # energy lines the sweep's points printed in this process

    def __reduce__(self) -> tuple:
        """A job that a launcher runs in another process records into a fresh command there."""
        return (Command, ())

    # ------------------------------------------------------------------ what the sweeper tells
    def sweep_started(self, sweep_dir: Path, lock: SweepLock | None) -> None:
        self.multirun = True
        self.sweep_dir = sweep_dir
        self.sweep_outcomes = []
        self._lock = lock
        self.said = set()

    def sweep_ready(self, config: DictConfig) -> None:
        """The tracker checked once, before the sweep's first point (exit 3 when it cannot be
        used)."""
        from omegaconf import OmegaConf

        from llem.tracking.probe import check_tracker

        check_tracker(OmegaConf.select(config, "tracking", default=None))

    def terminal_taken(self, taken: bool) -> None:
        self.runner.live_display = taken

    def sweep_finished(self, outcomes: list[JobOutcome], preflight_failed: bool) -> None:
        self.sweep_outcomes = list(outcomes)
        self.dry_run_preflight_failed = preflight_failed
        self.runner.close()  # the last point's model, kept for a next point

    # ------------------------------------------------------------------ the end of the command
    def close(self) -> None:
        """Release the sweep directory's lock (the report is written) and the runner."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        self.runner.close()

    def outcomes(self) -> list[JobOutcome]:
        return self.sweep_outcomes if self.sweep_outcomes is not None else self.job_outcomes

    def exit_code(self) -> int:
        if self.dry_run_preflight_failed:
            return EXIT_PREFLIGHT
        if self.multirun and any(o.status == "failed" for o in self.outcomes()):
            return EXIT_SWEEP_FAILED
        return EXIT_OK

    def interrupted(self) -> str:
        """The line printed after Ctrl-C, with the whole command that resumes a sweep."""
        return "interrupted: finished runs are kept; nothing unfinished is marked ok" + (
            f"; resume with: {self.resume_command()}" if self.sweep_dir else ""
        )

    def resume_command(self) -> str:
        """The command line again, into this sweep's directory (absolute, shell-quoted)."""
        import shlex

        assert self.sweep_dir is not None
        kept = [a for a in self.argv if a.lstrip("+~").partition("=")[0] != "hydra.sweep.dir"]
        where = f"hydra.sweep.dir={Path(self.sweep_dir).resolve()}"
        return shlex.join(["python", "-m", "llem", *kept, where])

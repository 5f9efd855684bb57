"""One sweep at a time in a sweep directory.

A real sweep (not a dry run) holds ``<sweep dir>/.llem-sweep.lock`` (an OS file lock, through the
``filelock`` package) from before it composes its points (where the directory exists; else from
before it reads the directory to plan) until its end-of-sweep report is written. A second sweep
started into the same directory meanwhile stops at once with one line,
``error: another llem sweep is running in DIR ...``, and exit code 3, before it reads, moves or
writes anything there. The lock goes with the process that held it, so a killed sweep leaves
nothing to clean up (the file itself stays, empty).
"""

from __future__ import annotations

from pathlib import Path

from llem.errors import SweepInUse

LOCK_FILE = ".llem-sweep.lock"


class SweepLock:
    """The lock of one sweep directory, held by this process until ``release``."""

    def __init__(self, sweep_dir: Path) -> None:
        from filelock import FileLock

        self.sweep_dir = sweep_dir
        self._lock = FileLock(str(sweep_dir / LOCK_FILE), timeout=0)
        # the folders that acquiring creates (the sweep directory and its missing parents)
        self._created = [d for d in (sweep_dir, *sweep_dir.parents) if not d.exists()]

    def acquire(self) -> SweepLock:
        """Take the lock now or raise ``SweepInUse`` (no waiting); holding it already is fine."""
        from filelock import Timeout

        if self.held:
            return self
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise SweepInUse(
                f"another llem sweep is running in {self.sweep_dir}: wait for it to finish, "
                "or give this one another hydra.sweep.dir"
            ) from None
        return self

    @property
    def held(self) -> bool:
        return bool(self._lock.is_locked)

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release(force=True)

    def abandon(self) -> None:
        """Release the lock of a sweep that stops before it wrote anything, and take away the lock
        file and the folders acquiring created (those still empty): nothing is left behind."""
        self.release()
        if not self._created:
            return
        (self.sweep_dir / LOCK_FILE).unlink(missing_ok=True)
        for folder in self._created:
            try:
                folder.rmdir()
            except OSError:  # not empty (or not there): stop here
                return

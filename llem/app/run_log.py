"""What a failed run leaves in its directory's ``llem.log``: the error, its hint and, for an
unexpected exception, the traceback.

The log is where a user looks afterwards, so it holds what the terminal said. Hydra's job
logging gives the root logger two handlers, the console and the run directory's file
(llem/conf/config.yaml); a single run's error already reaches the terminal through
``llem.app.boundary.guard`` (one ``error:`` line and its ``hint:``, or the traceback), so it is
written to the file handlers alone, never to the console a second time. Where the job's logging
has no file in the run directory (``hydra/job_logging=disabled``), nothing is written.
"""

from __future__ import annotations

import logging
from pathlib import Path

from llem.errors import LlemError, first_line

log = logging.getLogger("llem")


def file_handlers(run_dir: Path) -> list[logging.FileHandler]:
    """The root logger's handlers that write a file inside ``run_dir`` (Hydra's ``llem.log``)."""
    folder = Path(run_dir).resolve()
    return [
        h
        for h in logging.getLogger().handlers
        if isinstance(h, logging.FileHandler) and Path(h.baseFilename).parent == folder
    ]


def to_file(run_dir: Path, text: str, exc: BaseException | None = None) -> None:
    """``text`` (an ERROR record of the ``llem`` logger; ``exc``'s traceback after it) in
    ``run_dir``'s log file only."""
    exc_info = None if exc is None else (type(exc), exc, exc.__traceback__)
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, text, (), exc_info)
    for handler in file_handlers(run_dir):
        if record.levelno >= handler.level:
            handler.handle(record)


def failure_lines(exc: BaseException) -> list[str]:
    """What the terminal says of ``exc``: ``error: ...`` and ``hint: ...`` for a known error,
    the type and first line of anything else."""
    if not isinstance(exc, LlemError):
        return [f"unexpected error: {type(exc).__name__}: {first_line(exc)}"]
    return [f"error: {exc.message}"] + ([f"hint: {exc.hint}"] if exc.hint else [])


def record_failure(run_dir: Path, exc: BaseException) -> None:
    """A single run's failure in its ``llem.log`` (the terminal has it from the boundary)."""
    lines = failure_lines(exc)
    unexpected = not isinstance(exc, LlemError)
    for i, text in enumerate(lines):
        to_file(run_dir, text, exc if unexpected and i == len(lines) - 1 else None)

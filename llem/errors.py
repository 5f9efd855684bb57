"""One exception family for everything llem reports to a user.

Each class carries its documented exit code. The entrypoint turns an ``LlemError`` into a single
``error: ...`` line (plus a ``hint:`` line when there is one) and exits with ``exit_code``; anything
else is unexpected, is logged with its traceback, and exits 1.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_CONFIG = 2
EXIT_PREFLIGHT = 3
EXIT_SWEEP_FAILED = 4
EXIT_INTERRUPTED = 130
EXIT_SIGTERM = 128 + signal.SIGTERM  # a command ended by SIGTERM, as a shell reports it


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when the message is empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def interrupted_by(exc: BaseException) -> bool:
    """A Ctrl-C, or an error raised while one was unwinding (a library's cleanup failing)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__context__
    return False


class LlemError(Exception):
    """A failure that llem explains to the user in one line."""

    exit_code = EXIT_UNEXPECTED

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict[str, str | None]:
        return {"type": type(self).__name__, "message": self.message, "hint": self.hint}


class ConfigError(LlemError):
    """Bad key, type, value or combination in the configuration (exit 2)."""

    exit_code = EXIT_CONFIG

    def __init__(self, problems: Sequence[str] | str, hint: str | None = None) -> None:
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        super().__init__("; ".join(self.problems), hint)


class PreflightError(LlemError):
    """One or more pre-flight checks failed before any model was loaded (exit 3)."""

    exit_code = EXIT_PREFLIGHT

    def __init__(self, problems: Sequence[str], hint: str | None = None) -> None:
        self.problems = list(problems)
        n = len(self.problems)
        head = f"{n} pre-flight check{'s' if n != 1 else ''} failed: "
        super().__init__(head + "; ".join(self.problems), hint)


class SweepInUse(LlemError):
    """Another sweep is running in the same sweep directory (exit 3, like a failed pre-flight
    check: nothing was read, moved or written there)."""

    exit_code = EXIT_PREFLIGHT


class RunError(LlemError):
    """A run started but could not finish (model load, generation, out of memory): exit 1, as
    an unexpected error, but one line and no traceback; what pre-flight can know is a
    ``PreflightError`` instead."""

    exit_code = EXIT_UNEXPECTED


class OutOfMemory(RunError):
    """The device ran out of memory; the hint lists concrete fixes."""

"""The one boundary between llem and a terminal: an exception becomes output and an exit code.

Everything inside llem raises (``LlemError`` subclasses carry their exit code and hint); only
``guard`` turns an exception into output and an exit code, pypa/build's way:

* a known error: ``error: <message>`` (one line, or a head line and one line per problem), then
  ``hint: ...`` when there is one; its documented exit code;
* Ctrl-C: one line saying what was kept, exit 130;
* anything else: the traceback, exit 1.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from llem.errors import (
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    LlemError,
    PreflightError,
    interrupted_by,
)


def print_error(exc: LlemError) -> None:
    """``error: ...`` (+ ``hint: ...``) on stderr; several problems get one line each."""
    problems = getattr(exc, "problems", [])
    if len(problems) > 1:
        preflight = isinstance(exc, PreflightError)
        what = "pre-flight checks failed" if preflight else "configuration errors"
        lines = [f"error: {len(problems)} {what}:"] + [f"  - {p}" for p in problems]
        print("\n".join(lines), file=sys.stderr)
    else:
        print(f"error: {exc.message}", file=sys.stderr)
    if exc.hint:
        print(f"hint: {exc.hint}", file=sys.stderr)


def guard(body: Callable[[], int], interrupted: Callable[[], str] | None = None) -> int:
    """Run ``body`` and return its exit code; turn whatever it raises into output + exit code."""
    try:
        return body()
    except LlemError as exc:
        print_error(exc)
        return exc.exit_code
    except (KeyboardInterrupt, Exception) as exc:
        if interrupted_by(exc):  # also an error raised while a Ctrl-C was unwinding
            print(interrupted() if interrupted else "interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        traceback.print_exc()
        return EXIT_UNEXPECTED

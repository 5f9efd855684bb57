"""The one boundary between llem and a terminal: command-line parsing and exit codes.

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
from typing import NoReturn

from llem.errors import (
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    ConfigError,
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


# --------------------------------------------------------------------------- Hydra's command line


def _raise_usage(message: str) -> NoReturn:
    raise ConfigError(
        f"command line: {message}", hint="python -m llem --help lists the options and groups"
    )


def normalize_argv(argv: list[str]) -> list[str]:
    """Hydra's flags first, then the overrides, so options may stand anywhere on the line.

    Hydra's own parser takes overrides only after its flags (``dry_run=true --multirun a=1,2``
    fails there with a usage dump); parsing intermixed and writing the flags back first accepts
    both orders. A usage error is a one-line ``ConfigError`` (exit 2).
    """
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.error = _raise_usage  # type: ignore[method-assign]
    args = parser.parse_intermixed_args(argv)
    flags: list[str] = []
    for action in parser._actions:
        if not action.option_strings or action.dest == "version":
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        flag = action.option_strings[0]
        if action.nargs == 0 or (action.nargs == "?" and value == action.const):
            flags.append(flag)
        else:
            flags += [flag, str(value)]
    if "--version" in argv:
        flags.insert(0, "--version")
    return flags + list(args.overrides or [])


def condense_hydra_error(text: str) -> str:
    """Hydra's multi-line composition error as one line that keeps the key, value and options."""
    if "Traceback (most recent call last)" in text:
        return [line.strip() for line in text.splitlines() if line.strip()][-1]
    parts: list[str] = []
    options: list[str] = []
    options_head: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("Set the environment variable HYDRA_FULL_ERROR"):
            continue
        if line.startswith(("full_key:", "reference_type=", "object_type=")):
            continue
        if line.startswith("Config search path:"):
            break
        if line.startswith("Available options in"):
            options_head = line.rstrip(":").replace("Available", "available")
            continue
        if options_head is not None and raw.startswith(("\t", " ")):
            options.append(line)
            continue
        parts.append(line.rstrip("."))
    if options_head:
        parts.append(f"{options_head}: {', '.join(options)}")
    return "; ".join(parts) or "invalid command line"


def hydra_error_text(exc: BaseException) -> str:
    """An exception's message plus its cause's, as Hydra would have printed them."""
    text = str(exc)
    if exc.__cause__ is not None and str(exc.__cause__) not in text:
        text += "\n" + str(exc.__cause__)
    return text


def is_composition_error(exc: BaseException) -> bool:
    """Hydra or OmegaConf refusing the command line or the config (a user error, exit 2)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    return isinstance(exc, (HydraException, OmegaConfBaseException))


def as_config_error(exc: BaseException, prefix: str = "") -> ConfigError:
    return ConfigError(prefix + condense_hydra_error(hydra_error_text(exc)))

"""Hydra's error text as llem reports it: one line naming the key, the value and the options.

Hydra and OmegaConf explain a bad command line in several lines (the key, the object type, the
search path, a hint about HYDRA_FULL_ERROR). ``condense_hydra_error`` keeps what a user needs on
one line; ``explain_composition_error`` goes further: an unknown study (``+experiment=NAME``)
lists the available studies, a bad key inside one names the file, and a misspelt key on the
command line (``decoder.temprature=0.7``, which Hydra answers with "To append to your config use
+decoder.temprature=0.7") is said not to exist, with the closest key and the allowed ones; a
value outside a key's allowed ones (``device=tpu``), of the wrong type (``pytorch.batch_size=four``)
or a group option that does not exist (``decoder=greddy``) gets the allowed ones and, where one is
close, "did you mean". A sweep's points get the same lines (``llem.sweep.planner``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from llem.errors import ConfigError
from llem.hydra.compose.keys import first_unknown_key, no_such_key
from llem.hydra.compose.studies import GROUP, PACKAGE_CONF, dir_file, package_file


def condense_hydra_error(text: str) -> str:
    """Hydra's multi-line composition error as one line that keeps the key, value and options."""
    if "Traceback (most recent call last)" in text:
        return [line.strip() for line in text.splitlines() if line.strip()][-1]
    grammar = _GRAMMAR.search(text)
    if grammar is not None:
        return (
            f"{grammar['override'].strip()}: Hydra's override grammar cannot read it (allowed: "
            "quote a value holding spaces or < > characters, e.g. "
            "\"hydra.sweeper.constraints=['latency.tpot_ms.p90 <= 50']\")"
        )
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


_GRAMMAR = re.compile(r"^(?:Lexer|Parser)?\w*Exception: (?P<override>.+)$\s+\^", re.M)
_NOT_FOUND = re.compile(r"Could not find '" + GROUP + r"/([^']+)'")
_IN_FILE = re.compile(r"In '" + GROUP + r"/([^']+)'")
_FULL_KEY = re.compile(r"full_key:\s*(\S+)")
_NOT_IN = re.compile(r"Key '[^']+' not in '[^']+'")
_CANNOT_OVERRIDE = re.compile(r"Could not override '([^']+)'")
_BAD_VALUE = re.compile(
    r"Error merging override (?P<key>[^=\s]+)=(?P<value>\S*).*?"
    r"(?:could not be converted to (?P<type>\w+)|is not a valid (?P<bool>bool))",
    re.S,
)
_ENUM = re.compile(
    r"Error merging override (?P<key>[^=\s]+)=(?P<value>\S*)\s+"
    r"Invalid value '[^']*', expected one of \[(?P<allowed>[^\]]*)\]"
)
_NO_OPTION = re.compile(r"Could not find '(?P<group>[^']+)/(?P<option>[^'/]+)'")
_OPTIONS_OF = re.compile(
    r"^Available options in '(?P<group>[^']+)':\n(?P<lines>(?:[ \t]+\S.*\n?)+)", re.M
)
_ALLOWED = {
    "Float": ("a number", "a number such as 0.7"),
    "Integer": ("a whole number", "a whole number such as 4"),
    "bool": ("true or false", "true or false"),
}


def _config_dir(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config-dir="):
            return arg.split("=", 1)[1]
    return None


def _options_in(directory: Path) -> list[str]:
    base = directory / GROUP
    if not base.is_dir():
        return []
    return sorted(str(p.relative_to(base).with_suffix("")) for p in base.rglob("*.yaml"))


def available_experiments(argv: Sequence[str] = ()) -> list[tuple[str, list[str]]]:
    """(where, names) for llem's shipped studies, ``./conf``'s, and ``--config-dir``'s."""
    shipped_dir = resources.files(PACKAGE_CONF).joinpath(GROUP)
    shipped = sorted(p.name[:-5] for p in shipped_dir.iterdir() if p.name.endswith(".yaml"))
    found = [("shipped with llem", shipped)]
    found.append((f"./conf/{GROUP}", _options_in(Path.cwd() / "conf")))
    extra = _config_dir(argv)
    if extra:
        found.append((f"{extra.rstrip('/')}/{GROUP}", _options_in(Path(extra))))
    return found


def _locate(name: str, argv: Sequence[str]) -> str:
    """Where Hydra read ``experiment/NAME`` from, in search path order."""
    hit = package_file(name) or dir_file(str(Path.cwd() / "conf"), name)
    extra = _config_dir(argv)
    if hit is None and extra:
        hit = dir_file(extra, name)
    return hit[0] if hit else f"{GROUP}/{name}.yaml"


def _condensed_tail(text: str) -> str:
    line = condense_hydra_error(text)
    line = re.sub(r"^In '" + GROUP + r"/[^']+':\s*", "", line)
    return re.sub(r"\w+ raised while composing config:;\s*", "", line)


def explain_composition_error(exc: BaseException, argv: Sequence[str]) -> ConfigError | None:
    """Hydra's error for an unknown study, a bad key in one or an unknown key on the command
    line as a one-line ``ConfigError``.

    None when the error is none of these (the caller then reports it as it is).
    """
    message = explain_hydra_text(hydra_error_text(exc), argv)
    return ConfigError(message) if message else None


def explain_hydra_text(text: str, argv: Sequence[str]) -> str | None:
    """One line for Hydra's report on an unknown study, a bad key in one, or an unknown key on
    the command line (None: not ours)."""
    missing = _NOT_FOUND.search(text)
    if missing:
        name = missing.group(1)
        found = available_experiments(argv)
        groups = [f"{', '.join(names) or 'none'} ({where})" for where, names in found]
        return (
            f"no experiment '{name}' (+{GROUP}={name}); available: {'; '.join(groups)}; "
            f"a study of your own goes in ./conf/{GROUP}/{name}.yaml"
        )
    inside = _IN_FILE.search(text)
    if inside:
        name = inside.group(1)
        where = _locate(name, argv)
        key = _FULL_KEY.search(text)
        detail = _condensed_tail(text)
        if key and _NOT_IN.search(detail):
            detail = no_such_key(key.group(1))
        elif key and key.group(1) not in detail:
            detail = f"{key.group(1)}: {detail}"
        return f"{where}: {detail}"
    return _explain_value(text) or _explain_option(text)


def _did_you_mean(value: str, allowed: Sequence[str]) -> str:
    near = difflib.get_close_matches(value, list(allowed), n=1, cutoff=0.7)
    return f"; did you mean {near[0]}?" if near else ""


def _explain_option(text: str) -> str | None:
    """``decoder=greddy``: no such option in its group, the closest and the allowed ones."""
    missing, listed = _NO_OPTION.search(text), _OPTIONS_OF.search(text)
    if missing is None or listed is None or listed["group"] != missing["group"]:
        return None
    group, option = missing["group"], missing["option"]
    options = [line.strip() for line in listed["lines"].splitlines() if line.strip()]
    return (
        f"{group}={option}: no option '{option}' in group {group}"
        f"{_did_you_mean(option, options)} (allowed: {', '.join(options)})"
    )


def _explain_value(text: str) -> str | None:
    """A value of the wrong type (``pytorch.batch_size=four``), one outside a key's allowed
    values (``device=tpu``), or a key the schema does not declare."""
    enum = _ENUM.search(text)
    if enum:
        values = [a.strip() for a in enum["allowed"].split(",") if a.strip()]
        return (
            f"{enum['key']}={enum['value']}: not an allowed value"
            f"{_did_you_mean(enum['value'], values)} (allowed: {', '.join(values)})"
        )
    bad = _BAD_VALUE.search(text)
    kind = bad and (bad.group("type") or bad.group("bool"))
    if bad and kind in _ALLOWED:
        what, allowed = _ALLOWED[kind]
        return f"{bad.group('key')}={bad.group('value')}: not {what} (allowed: {allowed})"
    cannot = _CANNOT_OVERRIDE.search(text)
    unknown = first_unknown_key(cannot.group(1)) if cannot else None
    return no_such_key(unknown) if unknown else None

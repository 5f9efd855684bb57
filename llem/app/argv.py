"""The command line before Hydra sees it: options anywhere on the line, and llem's ``--help``."""

from __future__ import annotations

from typing import NoReturn

from llem.errors import ConfigError

HELP = """\
llem: how fast and how energy-efficiently a causal LM generates text.

usage:
  python -m llem [KEY=VALUE ...]                  one run (default: the embedded SmolLM2-135M)
  python -m llem --multirun KEY=A,B [KEY=C,D ...]  a sweep over the grid
  python -m llem dry_run=true --multirun ...       validate and pre-flight every point, load nothing
  python -m llem.report DIR [DIR ...]              table, statistics and plots for finished runs

config groups chosen with GROUP=OPTION (each has a default):
{groups}
optional groups, added with +GROUP=OPTION (e.g. +backend=pytorch, +experiment=peer_sweep):
{optional}
examples:
  python -m llem decoder=creative decoder.temperature=0.7 pytorch.batch_size=8
  python -m llem model=hf model.name_or_path=HuggingFaceTB/SmolLM2-360M-Instruct
  python -m llem --multirun pytorch.batch_size=1,4,16 quantization=none,bnb-4bit repeat='range(3)'

python -m llem --cfg job       shows every key of the composed configuration
python -m llem --hydra-help    lists Hydra's own flags (launchers, sweepers, logging)
exit codes: 0 ok, 1 the run failed once started (or an unexpected error: a traceback),
            2 configuration error, 3 pre-flight failure (or the sweep directory is in use by
            another sweep), 4 a sweep point failed
"""


def help_text() -> str:
    """llem's --help: the groups and their options, read from the shipped conf/ folder."""
    from importlib import resources

    conf = resources.files("llem").joinpath("conf")
    defaulted = _defaulted_groups(conf.joinpath("config.yaml").read_text())
    lines: dict[bool, list[str]] = {True: [], False: []}
    for group in sorted(p.name for p in conf.iterdir() if p.is_dir() and p.name != "hydra"):
        options = sorted(
            p.name[:-5] for p in conf.joinpath(group).iterdir() if p.name.endswith(".yaml")
        )
        if options:
            lines[group in defaulted].append(f"  {group:<13} {', '.join(options)}")
    return HELP.format(groups="\n".join(lines[True]), optional="\n".join(lines[False]))


def _defaulted_groups(config_yaml: str) -> set[str]:
    """The groups config.yaml's defaults list chooses (``GROUP=OPTION`` replaces the choice);
    any other group is optional and is added with ``+GROUP=OPTION``."""
    import yaml

    groups = set()
    for entry in yaml.safe_load(config_yaml).get("defaults", []):
        if isinstance(entry, dict):
            groups |= {k for k in entry if not str(k).startswith("override ")}
    return groups


def wants_help(args: list[str]) -> bool:
    return "--help" in args or "-h" in args


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

"""Studies as files: ``+experiment=NAME`` found, checked, explained and recorded.

A study is a ``# @package _global_`` YAML file in a config group called ``experiment``: llem ships
protocols in ``llem/conf/experiment/``, and a user's own live in ``./conf/experiment/`` (put on the
search path by ``llem.app.searchpath``) or in ``--config-dir DIR``'s ``experiment/``.
Hydra composes it like any other group option; this module adds what Hydra does not do:

* ``check_study``: before a sweep plans anything, every grid entry the study file declares under
  ``hydra.sweeper.params`` is checked (the key exists in the schema, each value has the key's type,
  a group value is one of the group's options); a bad one is a ``ConfigError`` naming the file and
  the key. A file of the same name in a later search path entry, which Hydra silently ignores, is
  reported as a warning.
* ``record_study``: a real sweep keeps a copy of the file as it was run
  (``<sweep dir>/study/experiment/NAME.yaml``) and ``<sweep dir>/study.json`` (name, where the file
  came from, its SHA-256, the command-line overrides and the command that runs it again).

``llem.hydra.errors`` explains Hydra's errors about studies (an unknown one, a bad key in one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from llem.atomic import atomic_write_text
from llem.errors import ConfigError
from llem.hydra.compose.keys import no_such_key
from llem.hydra.overrides import hydra_parser
from llem.version import __version__

if TYPE_CHECKING:
    from hydra.core.config_loader import ConfigLoader
    from hydra.core.override_parser.types import Override
    from hydra.plugins.config_source import ConfigSource

log = logging.getLogger("llem.sweep")

GROUP = "experiment"
STUDY_JSON = "study.json"
STUDY_DIR = "study"
PACKAGE_CONF = "llem.conf"


@dataclasses.dataclass
class StudyFile:
    """One study file as Hydra found it."""

    name: str
    where: str  # what a user reads: a path relative to the working directory, or the package path
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- finding the file
def _display(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path.resolve())


def package_file(name: str) -> tuple[str, str] | None:
    node = resources.files(PACKAGE_CONF).joinpath(GROUP, *f"{name}.yaml".split("/"))
    if not node.is_file():
        return None
    return f"llem/conf/{GROUP}/{name}.yaml (shipped with llem)", node.read_text(encoding="utf-8")


def dir_file(directory: str, name: str) -> tuple[str, str] | None:
    path = Path(directory, GROUP, f"{name}.yaml")
    if not path.is_file():
        return None
    return _display(path), path.read_text(encoding="utf-8")


def _source_file(source: ConfigSource, name: str) -> tuple[str, str] | None:
    """(where, text) of ``experiment/NAME.yaml`` in one Hydra config source, None if absent."""
    scheme = source.scheme()
    if scheme == "file":
        return dir_file(source.path, name)
    if scheme == "pkg" and source.path.replace("/", ".") == PACKAGE_CONF:
        return package_file(name)
    return None


def _chosen_name(config: DictConfig) -> str | None:
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None)
    if choices is None:
        return None
    name = choices.get(GROUP)
    return str(name) if name else None


def find_study(config: DictConfig, sources: Sequence[ConfigSource]) -> list[StudyFile]:
    """Every copy of the chosen study file along the search path, the one Hydra used first.

    Empty when the command line chose no experiment.
    """
    name = _chosen_name(config)
    if name is None:
        return []
    found = []
    for source in sources:
        hit = _source_file(source, name)
        if hit is not None:
            found.append(StudyFile(name=name, where=hit[0], text=hit[1]))
    return found


# --------------------------------------------------------------------------- checking the grid
def _declared_params(text: str) -> dict[str, str]:
    """The ``hydra.sweeper.params`` entries the file itself writes, as override strings."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}  # Hydra has already reported a file it cannot parse
    params: object = data
    for part in ("hydra", "sweeper", "params"):
        params = params.get(part) if isinstance(params, dict) else None
    if not isinstance(params, dict):
        return {}
    return {str(k): _as_override_value(v) for k, v in params.items()}


def _as_override_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _group_options(sources: Sequence[ConfigSource], group: str) -> list[str] | None:
    """The options of config group ``group`` (None when no source has such a group)."""
    from hydra.core.object_type import ObjectType

    holders = [s for s in sources if s.is_group(group)]
    if not holders:
        return None
    names = set()
    for s in holders:
        names.update(s.list(group, ObjectType.CONFIG))
    return sorted(names)


def _sweep_values(override: Override) -> list[object]:
    if override.is_sweep_override():
        try:
            return list(override.sweep_iterator())
        except Exception:  # an interval or other sweep the grid sweeper cannot expand
            return []
    return [override.value()]


def _check_value(job: DictConfig, key: str, value: object) -> str | None:
    trial = job.copy()
    try:
        OmegaConf.update(trial, key, value, merge=True)
    except OmegaConfBaseException as exc:
        return str(exc).strip().splitlines()[0]
    return None


def _job_config(config: DictConfig) -> DictConfig:
    job = config.copy()
    with open_dict(job):
        job.pop("hydra", None)
    return job


def grid_problems(
    study: StudyFile, config: DictConfig, sources: Sequence[ConfigSource]
) -> tuple[list[str], list[str]]:
    """(problems, keys) of the grid entries the study file declares.

    ``problems`` is empty when every entry is valid; ``keys`` are the swept keys and groups.
    """
    declared = _declared_params(study.text)
    job = _job_config(config)
    parser = hydra_parser()
    problems: list[str] = []
    keys: list[str] = []
    for key, value in declared.items():
        try:
            override = parser.parse_override(f"{key}={value}")
        except Exception as exc:
            problems.append(f"{key}: cannot parse '{value}' ({str(exc).splitlines()[0]})")
            continue
        name = override.key_or_group
        keys.append(name)
        if name.startswith("hydra.") or override.package is not None:
            continue  # Hydra's own keys: Hydra checks them
        values = _sweep_values(override)
        options = _group_options(sources, name)
        if options is not None:
            bad = [str(v) for v in values if str(v) not in options]
            if bad:
                problems.append(
                    f"{name}: no option {', '.join(repr(b) for b in bad)} in group '{name}' "
                    f"(available: {', '.join(options)})"
                )
            continue
        if OmegaConf.select(job, name, default=_ABSENT) is _ABSENT:
            problems.append(no_such_key(name))
            continue
        for v in values:
            reason = _check_value(job, name, v)
            if reason:
                problems.append(f"{name}={v}: {reason}")
                break
    return problems, keys


_ABSENT = object()


def check_study(config: DictConfig, config_loader: ConfigLoader) -> StudyFile | None:
    """Check the chosen study before a sweep plans anything; return its file (None if none).

    Raises ``ConfigError`` (exit 2) naming the file and every bad grid key, or a required value
    that neither the study, its grid nor the command line sets. Warns when a file of the same name
    later on the search path is ignored.
    """
    sources = config_loader.get_sources()
    copies = find_study(config, sources)
    if not copies:
        return None
    study = copies[0]
    for other in copies[1:]:
        if other.text != study.text:
            log.warning(
                "experiment '%s': running %s; %s has the same name and is ignored "
                "(give it another name to run it)",
                study.name,
                study.where,
                other.where,
            )
    problems, swept = grid_problems(study, config, sources)
    if problems:
        raise ConfigError(
            [f"{study.where}: hydra.sweeper.params: {p}" for p in problems],
            hint="fix the study file; nothing was run",
        )
    unset = [
        k
        for k in sorted(OmegaConf.missing_keys(_job_config(config)))
        if not any(k == s or k.startswith(f"{s}.") for s in swept)
    ]
    if unset:
        raise ConfigError(
            [f"{k} is required but has no value" for k in unset],
            hint=f"experiment {study.name} leaves it to the command line: add "
            + " ".join(f"{k}=..." for k in unset),
        )
    return study


# --------------------------------------------------------------------------- recording it
def _rerun_command(sweep_dir: Path, name: str, overrides: Sequence[str]) -> str:
    """The command that runs the recorded study again, from any directory (an absolute
    ``--config-dir``; ``hydra.sweep.dir`` is dropped, so the rerun gets a fresh directory)."""
    import shlex

    kept = [
        o
        for o in overrides
        if o.split("=", 1)[0].lstrip("+~") not in (GROUP, "hydra.sweep.dir", "dry_run")
    ]
    parts = [
        "python -m llem --multirun",
        f"--config-dir {shlex.quote(str((sweep_dir / STUDY_DIR).resolve()))}",
        f"+{GROUP}={name}",
        *(shlex.quote(o) for o in kept),
    ]
    return " ".join(parts)


def record_study(sweep_dir: Path, config: DictConfig, config_loader: ConfigLoader) -> Path | None:
    """Keep the study file and ``study.json`` in ``sweep_dir``; return study.json's path.

    Does nothing (None) when the sweep was not started with ``+experiment=NAME``.
    """
    copies = find_study(config, config_loader.get_sources())
    if not copies:
        return None
    study = copies[0]
    copy = sweep_dir / STUDY_DIR / GROUP / f"{study.name}.yaml"
    atomic_write_text(copy, study.text)
    overrides = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task", default=[])]
    record = {
        "name": study.name,
        "source": study.where,
        "file": str(copy.relative_to(sweep_dir)),
        "sha256": study.sha256,
        "llem_version": __version__,
        "overrides": overrides,
        "rerun": _rerun_command(sweep_dir, study.name, overrides),
    }
    path = sweep_dir / STUDY_JSON
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path

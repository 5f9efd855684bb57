"""The index of lm-eval's own tasks, kept in llem's cache, so a task name is checked without
walking lm-eval's task yamls.

lm-eval's TaskManager builds its index by reading every task yaml it ships (14,683 names in
0.4.13; 20 to 30 s on a 2-core CPU), and pre-flight needs only each name's kind and yaml file.
Those are kept in ``<LLEM_CACHE_DIR, default ~/.cache/llem>/lm_eval/tasks-<version>-<key>.json``,
keyed by lm-eval's version, where its task directory is and when that directory was written (a
reinstall of the same version is a new key): the first check on a machine builds the index once,
later ones read the file. A directory of ``dataset.lm_eval_include`` is never cached here: it is
the user's, edited between runs, and small, so it is read afresh.

lm-eval is an optional extra; nothing here imports it (its version and place come from package
metadata), the index itself comes from the caller's ``build``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llem.atomic import atomic_write_text
from llem.cache import llem_cache_dir

log = logging.getLogger(__name__)

DISTRIBUTION = "lm_eval"


@dataclass(frozen=True)
class Listed:
    """A name in lm-eval's index: its kind as lm-eval's ``Kind`` names it (``TASK``,
    ``PY_TASK``, ``GROUP``, ``TAG``) and the yaml that defines it (None for a tag, which has
    none). ``cfg`` is lm-eval's ``Entry`` field, never kept: the yaml is read where needed."""

    name: str
    kind: str
    yaml_path: Path | None
    cfg: None = None


def tasks_dir() -> Path | None:
    """lm-eval's own task directory, found without importing lm-eval; None when not installed."""
    spec = importlib.util.find_spec(DISTRIBUTION)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "tasks"


def index_file() -> Path | None:
    """Where this install's index is kept; None when lm-eval or its task directory is absent."""
    where = tasks_dir()
    if where is None or not where.is_dir():
        return None
    version = importlib.metadata.version(DISTRIBUTION)
    stamp = f"{version}\n{where}\n{where.stat().st_mtime_ns}"
    key = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    return llem_cache_dir() / "lm_eval" / f"tasks-{version}-{key}.json"


@dataclass(frozen=True)
class OwnTasks:
    """lm-eval's own tasks: each name's kind and yaml as kept (relative to lm-eval's task
    directory ``base`` where under it); :meth:`get` makes the entry of the one name asked for."""

    kept: Mapping[str, tuple[str, str | None]]
    base: Path | None

    @property
    def names(self) -> list[str]:
        return list(self.kept)

    def get(self, name: str) -> Listed | None:
        if name not in self.kept:
            return None
        kind, where = self.kept[name]
        if where is None:
            return Listed(name, kind, None)
        path = Path(where)
        return Listed(
            name, kind, path if path.is_absolute() or self.base is None else self.base / path
        )


def own_tasks(build: Callable[[], Mapping[str, Any]]) -> OwnTasks:
    """lm-eval's own tasks: from the cache file when it holds this install's index, else from
    ``build()`` (a TaskManager's ``task_index`` over lm-eval's own tasks only), then written
    there for the next check. A cache that cannot be written is only logged."""
    base, path = tasks_dir(), index_file()
    if path is not None:
        kept = _read(path)
        if kept is not None:
            return OwnTasks(kept, base)

    def keep(p: Any) -> str | None:
        if p is None:
            return None
        p = Path(p)
        return str(p.relative_to(base)) if base is not None and p.is_relative_to(base) else str(p)

    own = OwnTasks(
        {
            str(name): (str(getattr(entry.kind, "name", entry.kind)), keep(entry.yaml_path))
            for name, entry in build().items()
        },
        base,
    )
    if path is not None:
        _write(path, own)
    return own


def _read(path: Path) -> dict[str, tuple[str, str | None]] | None:
    """The index kept in ``path``; None when it is absent or not one this module wrote."""
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))["tasks"]
        kept = {str(name): (str(kind), where) for name, (kind, where) in tasks.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if path.exists():
            log.debug("lm-eval's task index in %s not read (%s); building it again", path, exc)
        return None
    if not all(where is None or isinstance(where, str) for _, where in kept.values()):
        return None
    return kept


def _write(path: Path, own: OwnTasks) -> None:
    body = {"lm_eval_tasks_dir": str(own.base), "tasks": own.kept}
    try:
        atomic_write_text(path, json.dumps(body, separators=(",", ":")) + "\n")
    except OSError as exc:
        log.debug("lm-eval's task index not kept in %s: %s", path, exc)

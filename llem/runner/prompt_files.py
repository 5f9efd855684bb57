"""The JSONL prompt files: the user's (``dataset=jsonl``, at ``dataset.path``) and the built-in set
(``llem/data/prompts.jsonl``, a mix of short questions, instructions, summaries, code, reasoning and
long multi-paragraph contexts, read through importlib.resources). Each holds one JSON object per
line with a ``prompt`` string field and, where the run is scored, its ``reference``; blank lines
are skipped, and a relative ``dataset.path`` is resolved against the current working directory. A
file is read once while it stays as it is: the pre-flight's checks, the prompts and the references
of one run share one reading.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path

from llem.config.dataset import DatasetConfig
from llem.errors import ConfigError
from llem.quality.scorers import reference_problem

BUILTIN_RESOURCE = "prompts.jsonl"  # in llem/data/


@lru_cache(maxsize=1)
def builtin_texts() -> tuple[str, ...]:
    """All built-in prompt texts in file order (read through importlib.resources)."""
    resource = resources.files("llem").joinpath("data").joinpath(BUILTIN_RESOURCE)
    with resource.open("r", encoding="utf-8") as fh:
        return tuple(t for t, _, _ in _parse_records(fh, f"built-in llem/data/{BUILTIN_RESOURCE}"))


def jsonl_path(cfg: DatasetConfig) -> Path:
    if not cfg.path:
        raise ConfigError("dataset.path is not set; dataset.source=jsonl needs a JSONL file")
    path = Path(cfg.path).expanduser()
    if not path.is_absolute():
        path = Path.cwd() / path
    if not path.exists():
        raise ConfigError(
            f"dataset.path={cfg.path} does not exist (looked for {path})",
            hint="relative paths are resolved against the current working directory",
        )
    if not path.is_file():
        raise ConfigError(f"dataset.path={cfg.path} is not a file ({path})")
    return path


def read_jsonl(path: Path) -> list[str]:
    return [text for text, _, _ in _records(path)]


def _records(path: Path) -> tuple[tuple[str, str | None, int], ...]:
    """The file's records (``_parse_records``), read once while the file stays as it is: the
    pre-flight's checks, the prompts and the references of one run share one reading."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror or exc}") from None
    return _read_records(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=4)
def _read_records(
    path: Path, _mtime_ns: int, _size: int
) -> tuple[tuple[str, str | None, int], ...]:
    try:
        with path.open("r", encoding="utf-8") as fh:
            return tuple(_parse_records(fh, str(path)))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path} cannot be read: {exc.strerror or exc}") from None


def _parse_records(lines: Iterable[str], name: str) -> list[tuple[str, str | None, int]]:
    """Each line's prompt, its ``reference`` (a string or a number; None when absent) and the
    line's number."""
    records: list[tuple[str, str | None, int]] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name} line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where} is not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ConfigError(f'{where} must be a JSON object with a "prompt" field')
        if "prompt" not in obj:
            raise ConfigError(f'{where} has no "prompt" field')
        text = obj["prompt"]
        if not isinstance(text, str):
            raise ConfigError(f'{where}: "prompt" must be a string, not {type(text).__name__}')
        if not text.strip():
            raise ConfigError(f'{where}: "prompt" is empty')
        reference = obj.get("reference")
        if reference is not None and (
            isinstance(reference, bool) or not isinstance(reference, (str, int, float))
        ):
            kind = type(reference).__name__
            raise ConfigError(f'{where}: "reference" must be a string or a number, not {kind}')
        records.append((text, None if reference is None else str(reference), lineno))
    return records


def read_references(cfg: DatasetConfig) -> list[str]:
    """The ``reference`` of each of the run's JSONL prompts (``dataset.scorer`` set), in the order
    ``load_prompts`` takes them. Raises ``ConfigError`` naming the first line without one."""
    taken = _records(jsonl_path(cfg))[: cfg.n_prompts]
    missing = [lineno for _, ref, lineno in taken if ref is None]
    if missing:
        raise ConfigError(
            f'dataset.scorer={cfg.scorer} needs a "reference" on every line of dataset.path='
            f"{cfg.path}: {len(missing)} of its {len(taken)} prompts lack one (first: line "
            f"{missing[0]})",
            hint='add a "reference" to each line, or set dataset.scorer=null to measure unscored',
        )
    for _, ref, lineno in taken:
        if ref is not None and (why := reference_problem(str(cfg.scorer), ref)):
            raise ConfigError(f"dataset.path={cfg.path} line {lineno}: {why}")
    return [ref for _, ref, _ in taken if ref is not None]

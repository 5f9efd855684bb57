"""Prompt sources: the built-in set, seeded synthetic token ids, and the user's own JSONL file.

``dataset.source`` picks one:

* ``builtin``: the first ``n_prompts`` prompts of ``llem/data/prompts.jsonl`` in file order (a mix
  of short questions, instructions, summaries, code, reasoning and long multi-paragraph contexts).
* ``synthetic``: ``n_prompts`` prompts of exactly ``input_tokens`` token ids each, drawn uniformly
  from the tokenizer's vocabulary without its special tokens, seeded by ``dataset.seed``. Prompt
  ``i`` does not depend on ``n_prompts``, so a larger set extends a smaller one.
* ``jsonl``: one JSON object per line with a ``prompt`` string field; blank lines are skipped and
  a relative ``dataset.path`` is resolved against the current working directory.

``n_prompts`` null (``dataset=jsonl``'s default) takes every prompt of the file or the built-in
set; synthetic prompts need a number.

Text prompts go through the tokenizer's chat template by default (``dataset.chat_template``:
``auto`` uses it when the tokenizer has one, ``true`` requires one, ``false`` sends the text as
it is). A templated prompt becomes the exact token ids the template renders (special tokens
included, none added twice), so input-token counts count the template's tokens too. Synthetic
token ids never go through a template.

``check_dataset`` runs the checks that need no tokenizer (for pre-flight and dry runs) and returns
every problem as one sentence; ``load_prompts`` raises ``ConfigError`` (exit 2) instead.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from llem.config.dataset import (
    ChatTemplate,
    DatasetConfig,
    DatasetSource,
    chat_template_mode,
)
from llem.errors import ConfigError
from llem.quality import arithmetic
from llem.quality.lm_eval_task import lm_eval_problems
from llem.quality.scorers import reference_problem
from llem.quality.task import Task
from llem.vocabulary.workload import Prompt

BUILTIN_RESOURCE = "prompts.jsonl"  # in llem/data/


@dataclass(frozen=True)
class PromptSet:
    prompts: list[Prompt]
    chat_template_applied: bool


def prepare_prompts(cfg: DatasetConfig, tokenizer: Any, task: Task | None = None) -> PromptSet:
    """The configured prompts (``task``'s when the run is scored), through the tokenizer's chat
    template where ``chat_template`` says; a task whose prompts are final (``Task.templated``:
    lm-eval built them, its chat template included where ``chat_template`` says) is taken as is.

    Raises ``ConfigError`` as ``load_prompts`` does, and for ``chat_template=true`` with a
    tokenizer that has no chat template.
    """
    prompts = list(task.prompts) if task is not None else load_prompts(cfg, tokenizer)
    if task is not None and task.templated:
        return PromptSet(prompts, uses_chat_template(cfg, tokenizer))
    if not uses_chat_template(cfg, tokenizer):
        return PromptSet(prompts, False)
    return PromptSet([_templated(p, tokenizer) for p in prompts], True)


def uses_chat_template(cfg: DatasetConfig, tokenizer: Any) -> bool:
    """Whether text prompts go through the tokenizer's chat template (never synthetic ones).
    Raises ``ConfigError`` for ``chat_template=true`` with a tokenizer that has none."""
    mode = chat_template_mode(cfg.chat_template)
    if mode is ChatTemplate.false or _source(cfg) is DatasetSource.synthetic:
        return False
    if not getattr(tokenizer, "chat_template", None):
        if mode is ChatTemplate.true:
            raise ConfigError(
                "dataset.chat_template=true but the model's tokenizer has no chat template",
                hint="use dataset.chat_template=auto or false, or a model with a chat template",
            )
        return False
    return True


def _templated(prompt: Prompt, tokenizer: Any) -> Prompt:
    if prompt.text is None:
        return prompt
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt.text}], add_generation_prompt=True, tokenize=False
    )
    ids = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    return Prompt(token_ids=tuple(int(i) for i in ids), stop=prompt.stop)


def load_prompts(cfg: DatasetConfig, tokenizer: Any = None) -> list[Prompt]:
    """Return the ``cfg.n_prompts`` prompts of the configured source, as they are (no template);
    every prompt of the file (or the built-in set) when ``n_prompts`` is null.

    ``tokenizer`` is needed for ``synthetic`` only. Raises ``ConfigError`` for a bad value, an
    unreadable or malformed file, or a source with fewer prompts than asked for.
    """
    source = _source(cfg)
    if source is DatasetSource.synthetic:
        _check_n_prompts(cfg.n_prompts, source)
        return _synthetic(cfg, tokenizer)
    if source is DatasetSource.arithmetic:
        n = _check_n_prompts(cfg.n_prompts, source)
        return [Prompt(text=p.prompt) for p in arithmetic.problems(n, cfg.seed)]
    if source is DatasetSource.lm_eval:
        raise ValueError("an lm_eval task's prompts come from the task (llem.runner.tasks)")
    if cfg.n_prompts is not None:
        _check_n_prompts(cfg.n_prompts)
    if source is DatasetSource.builtin:
        texts, where = list(builtin_texts()), "the built-in set"
    else:
        texts, where = _read_jsonl(_jsonl_path(cfg)), f"dataset.path={cfg.path}"
    problem = _too_many(cfg.n_prompts, len(texts), where)
    if problem:
        raise ConfigError(problem, hint=_too_many_hint(source, len(texts), cfg.path))
    return [Prompt(text=t) for t in texts[: cfg.n_prompts]]


def _too_many(n: Any, available: int, where: str) -> str | None:
    if not isinstance(n, int) or n <= available:
        return None
    return (
        f"dataset.n_prompts={n} is more than the {available} prompts in {where} "
        f"(maximum {available}; dataset.n_prompts=null uses them all)"
    )


def _too_many_hint(source: DatasetSource, available: int, path: str | None) -> str:
    if source is DatasetSource.builtin:
        return "lower dataset.n_prompts, or use dataset=synthetic or dataset=jsonl for more"
    return f"lower dataset.n_prompts to {available} (or null: all of them) or add prompts to {path}"


def check_dataset(cfg: DatasetConfig) -> list[str]:
    """Cheap checks that need no tokenizer; every problem as one sentence naming key and value."""
    try:
        source = _source(cfg)
    except ConfigError as exc:
        return exc.problems
    problems = _count_problems(cfg, source)
    if source is DatasetSource.lm_eval and cfg.task:
        return problems + lm_eval_problems(cfg.task, cfg.lm_eval_include)
    if source in (DatasetSource.arithmetic, DatasetSource.lm_eval):
        return problems  # generated from the seed (an lm_eval task without a name: validation)
    if source is DatasetSource.synthetic:
        try:
            _check_input_tokens(cfg.input_tokens)
        except ConfigError as exc:
            problems.extend(exc.problems)
        return problems
    return problems + _file_problems(cfg, source)


def _count_problems(cfg: DatasetConfig, source: DatasetSource) -> list[str]:
    counted = source in (DatasetSource.synthetic, DatasetSource.arithmetic)
    try:
        if cfg.n_prompts is not None or counted:
            _check_n_prompts(cfg.n_prompts, source)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def _file_problems(cfg: DatasetConfig, source: DatasetSource) -> list[str]:
    """The built-in set's or the JSONL file's problems: too few prompts, missing references."""
    try:
        if source is DatasetSource.builtin:
            available, where = len(builtin_texts()), "the built-in set"
        else:
            available, where = len(_read_jsonl(_jsonl_path(cfg))), f"dataset.path={cfg.path}"
    except ConfigError as exc:
        return list(exc.problems)
    if available == 0:
        return [f"{where} holds no prompts (every line is blank)"]
    if problem := _too_many(cfg.n_prompts, available, where):
        return [problem]
    if source is DatasetSource.jsonl and cfg.scorer is not None:
        try:
            read_references(cfg)
        except ConfigError as exc:
            return list(exc.problems)
    return []


@lru_cache(maxsize=1)
def builtin_texts() -> tuple[str, ...]:
    """All built-in prompt texts in file order (read through importlib.resources)."""
    resource = resources.files("llem").joinpath("data").joinpath(BUILTIN_RESOURCE)
    with resource.open("r", encoding="utf-8") as fh:
        return tuple(t for t, _, _ in _parse_records(fh, f"built-in llem/data/{BUILTIN_RESOURCE}"))


# --- internals -----------------------------------------------------------------------------------


def _source(cfg: DatasetConfig) -> DatasetSource:
    try:
        return DatasetSource(cfg.source)
    except ValueError:
        allowed = ", ".join(s.value for s in DatasetSource)
        raise ConfigError(f"dataset.source={cfg.source} is not one of: {allowed}") from None


def _check_n_prompts(n: Any, source: DatasetSource | None = None) -> int:
    if n is None:
        name = (source or DatasetSource.synthetic).value
        raise ConfigError(
            f"dataset.n_prompts=null (every prompt) does not apply to dataset.source={name}: "
            "set the number of prompts to draw"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"dataset.n_prompts={n} must be a whole number of at least 1")
    return n


def _check_input_tokens(n: Any) -> int:
    if n is None:
        raise ConfigError(
            "dataset.input_tokens=null must be set to the prompt length in tokens for "
            "dataset.source=synthetic"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"dataset.input_tokens={n} must be a whole number of at least 1")
    return n


def _synthetic(cfg: DatasetConfig, tokenizer: Any) -> list[Prompt]:
    length = _check_input_tokens(cfg.input_tokens)
    if tokenizer is None:
        raise ValueError("synthetic prompts need the model's tokenizer")
    candidates = _ordinary_token_ids(tokenizer)
    if not candidates:
        raise ConfigError(
            "dataset.source=synthetic needs a tokenizer with ordinary (non-special) tokens; "
            "this one has none"
        )
    rng = random.Random(cfg.seed)
    return [
        Prompt(token_ids=tuple(rng.choices(candidates, k=length)))
        for _ in range(cfg.n_prompts or 0)
    ]


def _ordinary_token_ids(tokenizer: Any) -> list[int]:
    """Every id of the tokenizer's vocabulary (added tokens included) that is not special."""
    special = set(getattr(tokenizer, "all_special_ids", None) or ())
    # Reserved tokens (e.g. Llama 3's <|reserved_special_token_N|>) are marked special in
    # added_tokens_decoder without being listed in all_special_ids.
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    special.update(i for i, tok in added.items() if getattr(tok, "special", False))
    return [i for i in range(len(tokenizer)) if i not in special]


def _jsonl_path(cfg: DatasetConfig) -> Path:
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


def _read_jsonl(path: Path) -> list[str]:
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
    taken = _records(_jsonl_path(cfg))[: cfg.n_prompts]
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

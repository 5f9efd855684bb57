"""Prompt sources: the built-in set, seeded synthetic token ids, and the user's own JSONL file.

``dataset.source`` picks one:

* ``builtin``: the first ``n_prompts`` prompts of ``llem/data/prompts.jsonl`` in file order.
* ``synthetic``: ``n_prompts`` prompts of exactly ``input_tokens`` seeded token ids each
  (``llem.runner.synthetic_prompts``).
* ``jsonl``: the prompts of the user's JSONL file, ``dataset.path`` (how the files are read:
  ``llem.runner.prompt_files``).

``n_prompts`` null (``dataset=jsonl``'s default) takes every prompt of the file or the built-in
set; synthetic prompts need a number.

Text prompts then go through the tokenizer's chat template where ``dataset.chat_template`` says
(``llem.runner.chat_template``, whose ``prepare_prompts`` gives the run its prompts).

``check_dataset`` runs the checks that need no tokenizer (for pre-flight and dry runs) and returns
every problem as one sentence; ``load_prompts`` raises ``ConfigError`` (exit 2) instead.
"""

from __future__ import annotations

from typing import Any

from llem.config.dataset import DatasetConfig, DatasetSource
from llem.errors import ConfigError
from llem.quality import arithmetic
from llem.quality.lm_eval_task import lm_eval_problems
from llem.runner.prompt_files import builtin_texts, jsonl_path, read_jsonl, read_references
from llem.runner.synthetic_prompts import check_input_tokens, synthetic_prompts
from llem.vocabulary.workload import Prompt


def load_prompts(cfg: DatasetConfig, tokenizer: Any = None) -> list[Prompt]:
    """Return the ``cfg.n_prompts`` prompts of the configured source, as they are (no template);
    every prompt of the file (or the built-in set) when ``n_prompts`` is null.

    ``tokenizer`` is needed for ``synthetic`` only. Raises ``ConfigError`` for a bad value, an
    unreadable or malformed file, or a source with fewer prompts than asked for.
    """
    source = dataset_source(cfg)
    if source is DatasetSource.synthetic:
        _check_n_prompts(cfg.n_prompts, source)
        return synthetic_prompts(cfg, tokenizer)
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
        texts, where = read_jsonl(jsonl_path(cfg)), f"dataset.path={cfg.path}"
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
        source = dataset_source(cfg)
    except ConfigError as exc:
        return exc.problems
    problems = _count_problems(cfg, source)
    if source is DatasetSource.lm_eval and cfg.task:
        return problems + lm_eval_problems(cfg.task, cfg.lm_eval_include)
    if source in (DatasetSource.arithmetic, DatasetSource.lm_eval):
        return problems  # generated from the seed (an lm_eval task without a name: validation)
    if source is DatasetSource.synthetic:
        try:
            check_input_tokens(cfg.input_tokens)
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
            available, where = len(read_jsonl(jsonl_path(cfg))), f"dataset.path={cfg.path}"
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


def dataset_source(cfg: DatasetConfig) -> DatasetSource:
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

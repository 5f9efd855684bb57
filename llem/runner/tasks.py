"""The run's task: its scored prompts, from the built-in arithmetic task, a JSONL file with
references, or an lm-evaluation-harness task (``dataset.source``); None when nothing is scored.

The task's prompts are what the run generates from (``llem.runner.chat_template.prepare_prompts``);
after the window ``llem.runner.quality`` judges every request's answer with it.
"""

from __future__ import annotations

from typing import Any

from llem.config.dataset import DatasetConfig, DatasetSource, scores
from llem.errors import ConfigError
from llem.quality import arithmetic
from llem.quality.lm_eval_task import load_lm_eval_task
from llem.quality.scorers import SCORERS, Score
from llem.quality.task import Task
from llem.runner.chat_template import uses_chat_template
from llem.runner.prompt_files import read_references
from llem.runner.prompts import load_prompts

SCORER_PHRASES = {
    "exact": "exact: the whole answer equals the reference (case, spacing and outer "
    "punctuation ignored)",
    "number": "number: the last number in the answer equals the reference's",
    "choice": "choice: the choice letter the answer gives equals the reference's",
    "regex": "regex: the reference, a regular expression, matches somewhere in the answer",
}
METRIC = "accuracy"  # the proportion of answers a scorer of llem.quality.scorers judged correct


def load_task(cfg: DatasetConfig, tokenizer: Any) -> Task | None:
    """The run's task, or None when its prompts are not scored (``dataset.scorer`` null on a
    JSONL file, or a source without references). Raises ``ConfigError`` for a JSONL line without
    a reference, and as the lm-eval task's loader does."""
    if not scores(cfg):
        return None
    source = DatasetSource(cfg.source)
    if source is DatasetSource.arithmetic:
        scorer = cfg.scorer or arithmetic.SCORER
        refs = [p.reference for p in arithmetic.problems(cfg.n_prompts or 0, cfg.seed)]
        return _scored("arithmetic", scorer, load_prompts(cfg), refs)
    if source is DatasetSource.jsonl and cfg.scorer is not None:
        return _scored("jsonl", cfg.scorer, load_prompts(cfg), read_references(cfg))
    if source is DatasetSource.lm_eval and cfg.task:
        return load_lm_eval_task(
            cfg.task,
            cfg.lm_eval_include,
            limit=cfg.n_prompts,
            num_fewshot=cfg.num_fewshot,
            tokenizer=tokenizer,
            apply_chat_template=uses_chat_template(cfg, tokenizer),
            seed=cfg.seed,
        )
    raise ConfigError(f"dataset.source={source.value} has nothing to score (dataset.task unset)")


def _scored(name: str, scorer: str, prompts: list[Any], refs: list[str]) -> Task:
    judge_one = SCORERS[scorer]

    def judge(index: int, text: str) -> Score:
        return judge_one(text, refs[index])

    return Task(name, METRIC, SCORER_PHRASES[scorer], prompts, judge)

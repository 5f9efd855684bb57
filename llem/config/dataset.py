"""The ``dataset:`` group: where prompts come from, whether their answers are scored, and the rules
on ``dataset.chat_template`` and on scoring (``scoring_problems``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from llem.config.knobs import LLEM, knob
from llem.errors import ConfigError


class DatasetSource(Enum):
    builtin = "builtin"
    synthetic = "synthetic"
    jsonl = "jsonl"
    arithmetic = "arithmetic"  # the built-in scored task (llem.quality.arithmetic)
    lm_eval = "lm_eval"  # a task of lm-evaluation-harness (llem.quality.lm_eval_task)


SCORER_NAMES = ("exact", "number", "choice", "regex")  # llem.quality.scorers.SCORERS


class ChatTemplate(Enum):
    """``dataset.chat_template``. The field itself is ``bool | str`` because Hydra reads
    ``true``/``false`` on the command line as booleans, which an Enum field rejects."""

    auto = "auto"  # use the tokenizer's chat template when it has one
    true = "true"  # always (an error when the tokenizer has none)
    false = "false"  # send prompts as they are


@dataclass
class DatasetConfig:
    source: DatasetSource = knob(
        DatasetSource.builtin,
        doc="Where prompts come from: shipped prompts, seeded random tokens, a JSONL file, the "
        "built-in arithmetic task (scored), or an lm-evaluation-harness task (scored).",
        goes_to=LLEM,
    )
    path: str | None = knob(
        None,
        doc="JSONL file, one object with a `prompt` field per line (source=jsonl).",
        goes_to=LLEM,
        placeholder="<file.jsonl> (one JSON object per line with a 'prompt' field)",
    )
    n_prompts: int | None = knob(
        16,
        doc="Prompts per pass over the dataset; null: every prompt of the file or the built-in set "
        "(dataset=jsonl's default; synthetic needs a number).",
        goes_to=LLEM,
        ge=1,
    )
    input_tokens: int | None = knob(
        None,
        doc="Tokens per synthetic prompt (required for source=synthetic).",
        goes_to=LLEM,
        ge=1,
    )
    seed: int = knob(
        0, doc="Seed of the synthetic prompts and the arithmetic problems.", goes_to=LLEM
    )
    scorer: str | None = knob(
        None,
        doc="How each answer is judged against its reference: exact, number, choice or regex "
        "(source=jsonl: each line then needs a `reference`; source=arithmetic: number); null: "
        "no scoring.",
        goes_to=LLEM,
    )
    task: str | None = knob(
        None,
        doc="The lm-evaluation-harness task to run (source=lm_eval), e.g. gsm8k; its data must be "
        "on this machine (docs/quality.md).",
        goes_to=LLEM,
    )
    lm_eval_include: str | None = knob(
        None,
        doc="A directory of lm-evaluation-harness task yamls to add to its own (source=lm_eval): "
        "tasks with local data files.",
        goes_to=LLEM,
    )
    num_fewshot: int | None = knob(
        None,
        doc="Few-shot examples per prompt (source=lm_eval); null: the task's own default.",
        goes_to=LLEM,
        ge=0,
    )
    chat_template: bool | str = knob(
        "auto",
        doc="Send text prompts through the tokenizer's chat template: auto (when it has one), "
        "true (it must have one), false (raw text).",
        goes_to=LLEM,
    )


def chat_template_mode(value: Any) -> ChatTemplate:
    """``dataset.chat_template`` as a ``ChatTemplate`` (true/false may arrive as booleans)."""
    if isinstance(value, ChatTemplate):
        return value
    text = ("true" if value else "false") if isinstance(value, bool) else str(value).lower()
    try:
        return ChatTemplate(text)
    except ValueError:
        allowed = ", ".join(m.value for m in ChatTemplate)
        raise ConfigError(f"dataset.chat_template={value} is not one of: {allowed}") from None


def chat_template_problems(cfg: DatasetConfig) -> list[str]:
    """Config-time problems with ``dataset.chat_template`` (its value; synthetic with true)."""
    try:
        mode = chat_template_mode(cfg.chat_template)
    except ConfigError as exc:
        return exc.problems
    if mode is ChatTemplate.true and cfg.source in (DatasetSource.synthetic, "synthetic"):
        return [
            "dataset.chat_template=true does not apply to dataset.source=synthetic (its prompts "
            "are token ids; allowed: auto or false)"
        ]
    return []


def scoring_problems(cfg: DatasetConfig) -> list[str]:
    """Config-time problems with the scoring keys: a scorer that is not one, a scorer on prompts
    without references, lm_eval without its task, and lm_eval keys set for another source."""
    source = _source_name(cfg)
    problems = []
    if cfg.scorer is not None and cfg.scorer not in SCORER_NAMES:
        problems.append(f"dataset.scorer={cfg.scorer} is not one of: {', '.join(SCORER_NAMES)}")
    elif cfg.scorer is not None and source in ("builtin", "synthetic"):
        problems.append(
            f"dataset.scorer={cfg.scorer} needs a reference per prompt, and dataset.source="
            f"{source} has none (allowed: dataset=arithmetic, or dataset=jsonl with a "
            '"reference" on each line)'
        )
    elif cfg.scorer is not None and source == "lm_eval":
        problems.append(
            f"dataset.scorer={cfg.scorer} does not apply to dataset.source=lm_eval (the task "
            "judges with its own filters and metric; allowed: null)"
        )
    if source == "lm_eval" and not cfg.task:
        problems.append(
            "dataset.task is not set; dataset.source=lm_eval needs an lm-evaluation-harness task "
            "name (e.g. dataset.task=gsm8k)"
        )
    for key in ("task", "lm_eval_include", "num_fewshot"):
        if source != "lm_eval" and getattr(cfg, key) is not None:
            value = getattr(cfg, key)
            problems.append(
                f"dataset.{key}={value} applies to dataset.source=lm_eval only (this run's "
                f"source is {source}: use dataset=lm_eval, or drop the key)"
            )
    return problems


def scores(cfg: DatasetConfig) -> bool:
    """Whether the run's answers are scored after its window."""
    source = _source_name(cfg)
    return source in ("arithmetic", "lm_eval") or (source == "jsonl" and cfg.scorer is not None)


def _source_name(cfg: DatasetConfig) -> str:
    """``dataset.source`` as its name (an Enum in the typed tree, a string in a raw config)."""
    return cfg.source.value if isinstance(cfg.source, DatasetSource) else str(cfg.source)

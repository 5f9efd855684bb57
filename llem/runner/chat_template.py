"""The tokenizer's chat template, and the run's prompts through it (``prepare_prompts``).

Text prompts go through the tokenizer's chat template by default (``dataset.chat_template``:
``auto`` uses it when the tokenizer has one, ``true`` requires one, ``false`` sends the text as
it is). A templated prompt becomes the exact token ids the template renders (special tokens
included, none added twice), so input-token counts count the template's tokens too. Synthetic
token ids never go through a template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llem.config.dataset import ChatTemplate, DatasetConfig, DatasetSource, chat_template_mode
from llem.errors import ConfigError
from llem.quality.task import Task
from llem.runner.prompts import dataset_source, load_prompts
from llem.vocabulary.workload import Prompt


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
    if mode is ChatTemplate.false or dataset_source(cfg) is DatasetSource.synthetic:
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

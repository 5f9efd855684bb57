"""The ``dataset:`` group: where prompts come from, and the rules on ``dataset.chat_template``."""

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
        doc="Where prompts come from: shipped prompts, seeded random tokens, or a JSONL file.",
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
    seed: int = knob(0, doc="Seed of the synthetic prompts.", goes_to=LLEM)
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

"""Turning prompts into the token ids an engine receives (the same for every backend)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llem.vocabulary.workload import Prompt


def token_lists(tokenizer: Any, prompts: Sequence[Prompt]) -> list[list[int]]:
    """Each prompt's token ids: its own (templated or synthetic), else the tokenizer's encoding."""
    texts = [p.text for p in prompts if p.token_ids is None]
    encoded = iter(tokenizer(texts)["input_ids"]) if texts else iter(())
    return [list(p.token_ids) if p.token_ids is not None else next(encoded) for p in prompts]

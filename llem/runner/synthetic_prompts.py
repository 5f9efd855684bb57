"""Synthetic prompts (``dataset=synthetic``): ``n_prompts`` prompts of exactly ``input_tokens``
token ids each, drawn uniformly from the tokenizer's vocabulary without its special tokens, seeded
by ``dataset.seed``. Prompt ``i`` does not depend on ``n_prompts``, so a larger set extends a
smaller one. They are token ids, so they never go through a chat template.
"""

from __future__ import annotations

import random
from typing import Any

from llem.config.dataset import DatasetConfig
from llem.errors import ConfigError
from llem.vocabulary.workload import Prompt


def check_input_tokens(n: Any) -> int:
    if n is None:
        raise ConfigError(
            "dataset.input_tokens=null must be set to the prompt length in tokens for "
            "dataset.source=synthetic"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"dataset.input_tokens={n} must be a whole number of at least 1")
    return n


def synthetic_prompts(cfg: DatasetConfig, tokenizer: Any) -> list[Prompt]:
    length = check_input_tokens(cfg.input_tokens)
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

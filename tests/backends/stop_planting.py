"""Planting a stop string that a tiny random model is sure to generate: its greedy continuation
is generated first without one, and the stop string is the text of one of its tokens that the
text before it does not hold, so a request given that stop string must end with that token."""

from __future__ import annotations

from typing import Any

import torch


def greedy(loaded: Any, max_new: int, text: str) -> list[int]:
    """The prompt's greedy continuation alone, to max_new tokens, no stop string, no EOS."""
    tok = loaded.tokenizer
    ids = tok([text])["input_ids"]
    with torch.inference_mode():
        out = loaded.model.generate(
            input_ids=torch.tensor(ids),
            max_new_tokens=max_new,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
            eos_token_id=None,
        )
    return out[0, len(ids[0]) :].tolist()


def planted_stop(tok: Any, tokens: list[int], avoid: str = "", first: int = 3) -> tuple[str, int]:
    """A stop string that the continuation ``tokens`` completes at one of its tokens (from
    ``first`` on) and that ``avoid`` does not hold, and how many tokens run up to and including
    it."""
    for k in range(first, len(tokens) - 2):
        piece = tok.decode([tokens[k]])
        before = tok.decode(tokens[:k])
        special = tokens[k] in tok.all_special_ids
        if not special and piece.strip() and piece.isprintable() and piece not in before + avoid:
            assert piece in tok.decode(tokens[: k + 1])
            return piece, k + 1
    raise AssertionError(f"no token of {tokens} makes a stop string")

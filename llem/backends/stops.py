"""Stop strings (``Prompt.stop``) as every engine applies them: which strings a batch stops at,
and where in a request's generated tokens the first one was completed.

A request stops at the token that completes one of its stop strings; that token and every one
before it were generated, so they are its output tokens (the stop string's own tokens count). The
text a judge reads is cut before the stop string, as lm-eval cuts it (``llem.quality``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llem.vocabulary.workload import Prompt

STOP = "stop"  # a request ended at EOS or a stop string (the OpenAI API's finish_reason)
LENGTH = "length"  # a request ran to its token limit


def batch_stops(prompts: Sequence[Prompt]) -> tuple[str, ...]:
    """The stop strings of a batch generated together (one ``generate()`` call stops every row
    at the same strings). Raises ``ValueError`` when the prompts disagree: a run's prompts come
    from one task, which has one set."""
    stops = {p.stop for p in prompts}
    if len(stops) > 1:
        raise ValueError(f"the prompts of one batch have different stop strings: {sorted(stops)}")
    return next(iter(stops), ())


def prompt_stops(prompts: Sequence[Prompt]) -> list[str] | None:
    """Every stop string the prompts carry, in their order (what the result records); None
    when they carry none."""
    seen = list(dict.fromkeys(s for p in prompts for s in p.stop))
    return seen or None


def contains_stop(text: str, stops: Sequence[str]) -> bool:
    return any(s and s in text for s in stops)


def stop_index(tokenizer: Any, token_ids: Sequence[int], stops: Sequence[str]) -> int | None:
    """How many of ``token_ids`` run up to and including the token whose decoding completes the
    first stop string (the smallest prefix whose text contains one), or None when their text
    holds none. Special tokens are decoded as their text, so an EOS string among ``stops``
    matches the EOS token."""
    if not stops or not token_ids:
        return None

    def hit(n: int) -> bool:
        return contains_stop(
            tokenizer.decode(list(token_ids[:n]), skip_special_tokens=False), stops
        )

    if not hit(len(token_ids)):
        return None
    low, high = 1, len(token_ids)  # the text of a longer prefix holds the text of a shorter one
    while low < high:
        middle = (low + high) // 2
        if hit(middle):
            high = middle
        else:
            low = middle + 1
    return low


def tail_has_stop(tokenizer: Any, token_ids: Sequence[int], stops: Sequence[str]) -> bool:
    """Whether the text of the last few tokens contains a stop string: the check a streamed
    request makes after each new token (cheap: a stop string of L characters spans at most L
    tokens, with room for tokens that decode to part of a character)."""
    if not stops or not token_ids:
        return False
    span = 2 * max(len(s) for s in stops) + 4
    return contains_stop(
        tokenizer.decode(list(token_ids[-span:]), skip_special_tokens=False), stops
    )


def cut_chunks(times: list[float], counts: list[int], end: int) -> tuple[list[float], list[int]]:
    """A stream's chunks (arrival times, tokens in each) cut after its first ``end`` tokens."""
    kept_times: list[float] = []
    kept: list[int] = []
    for t, n in zip(times, counts, strict=True):
        if sum(kept) >= end:
            break
        kept_times.append(t)
        kept.append(min(n, end - sum(kept)))
    return kept_times, kept


def finish_reason(
    tokens: Sequence[int], max_new_tokens: int, eos: int | Sequence[int] | None
) -> str:
    """Why a request that no stop string ended stopped: "stop" before ``max_new_tokens`` or on
    an EOS token, else "length"."""
    if len(tokens) < max_new_tokens:
        return STOP
    eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
    return STOP if tokens and tokens[-1] in eos_ids else LENGTH

"""One answer of an OpenAI-compatible server as the HTTP client reads it (``client``): its
streamed events folded in as they arrive, or the whole answer at once (``server.stream=false``),
and each chunk's token count.

A chunk counts when it carries output text or output token ids (a usage-only chunk, a chat role
chunk do not); a whole answer is one chunk, whatever its text. Each chunk's tokens are the
server's per-chunk ``token_ids`` where every chunk has them, else each chunk 1 and the last the
rest of ``usage.completion_tokens`` (``chunk_counts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Answer:
    """What one answer has carried so far: the events of its stream, or the whole answer."""

    times_s: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    token_ids: list[list[int] | None] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    ended_s: float | None = None  # when the finish_reason arrived
    done: bool = False

    def take(self, event: dict[str, Any], at_s: float, chat: bool) -> None:
        """Fold one parsed ``data:`` event in (arrived at ``at_s``)."""
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        for choice in event.get("choices") or []:
            if chat:
                text = (choice.get("delta") or {}).get("content") or ""
            else:
                text = choice.get("text") or ""
            ids = choice.get("token_ids")
            if text or ids:
                self.times_s.append(at_s)
                self.texts.append(text)
                self.token_ids.append(list(ids) if ids is not None else None)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
                self.ended_s = at_s

    def take_whole(self, answer: dict[str, Any], at_s: float, chat: bool) -> None:
        """Fold a whole (not streamed) answer in, received at ``at_s``: one chunk with all its
        text, whatever the text (its tokens are the usage's)."""
        if isinstance(answer.get("usage"), dict):
            self.usage = answer["usage"]
        choices = answer.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        if chat:
            text = (choice.get("message") or {}).get("content") or ""
        else:
            text = choice.get("text") or ""
        self.times_s, self.texts, self.token_ids = [at_s], [text], [None]
        self.finish_reason = choice.get("finish_reason")
        self.ended_s, self.done = at_s, True


def count(value: Any) -> int | None:
    """A token count of the usage: a non-negative int, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def chunk_counts(
    token_ids: Sequence[list[int] | None], completion_tokens: int | None
) -> tuple[list[int], str | None]:
    """Each chunk's token count and, where they are not the server's own, why.

    The server's per-chunk ``token_ids`` where every chunk has them; else each chunk 1 and the
    last the rest of ``completion_tokens`` (at least 0; where usage is absent, 1 each)."""
    if token_ids and all(ids is not None for ids in token_ids):
        return [len(ids or ()) for ids in token_ids], None
    n = len(token_ids)
    counts = [1] * n
    if completion_tokens is None:
        return counts, "no usage and no per-chunk token ids: each chunk counted 1 (not tokens)"
    if n:
        counts[-1] = max(0, completion_tokens - (n - 1))
    return counts, (
        "the server did not say how many tokens each chunk carried: each counted 1, the last "
        "the rest of usage.completion_tokens"
    )

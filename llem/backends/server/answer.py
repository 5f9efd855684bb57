"""One answer of an OpenAI-compatible server as the HTTP client reads it (``client``): its
streamed events folded in as they arrive, or the whole answer at once (``server.stream=false``),
and each chunk's token count.

A streamed event is a chunk when its ``choices`` are not empty, whatever its text, as vLLM's
``bench serve`` takes it (``vllm/benchmarks/lib/endpoint_request_func.py``: ``if choices :=
data.get("choices")``, "text could be empty here, e.g. for special tokens"): the first such chunk
is the first token (TTFT), each later one an ITL entry. A chat stream's role chunk is one, and so
is a chunk whose text is empty (a special token, a character held back); a usage-only event
(``"choices": []``) is not. A whole answer is one chunk, whatever its text.

Each chunk's tokens are the server's per-chunk ``token_ids`` where every chunk has them; else a
chunk with text counts 1, one without text 0, and the last chunk the rest of
``usage.completion_tokens`` (``chunk_counts``). Without usage nothing counts tokens (the counts
are then placeholders, and ``output_tokens`` refuses to answer).
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
        choices = [c for c in event.get("choices") or [] if isinstance(c, dict)]
        if not choices:
            return  # a usage-only event: no chunk
        texts: list[str] = []
        ids: list[int] | None = []
        for choice in choices:
            if chat:
                texts.append((choice.get("delta") or {}).get("content") or "")
            else:
                texts.append(choice.get("text") or "")
            got = choice.get("token_ids")
            ids = ids + list(got) if ids is not None and got is not None else None
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
                self.ended_s = at_s
        self.times_s.append(at_s)
        self.texts.append("".join(texts))
        self.token_ids.append(ids)

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
    token_ids: Sequence[list[int] | None],
    completion_tokens: int | None,
    texts: Sequence[str] | None = None,
) -> tuple[list[int], str | None]:
    """Each chunk's token count and, where they are not the server's own, why.

    The server's per-chunk ``token_ids`` where every chunk with text has them (a chunk with
    neither, a chat role chunk, carries 0); else a chunk with text 1 (every chunk where ``texts``
    is None), one without text 0, and the last the rest of ``completion_tokens`` (at least 0;
    where usage is absent, no rest: placeholders)."""
    has_text = [texts is None or bool(texts[k]) for k in range(len(token_ids))]
    if any(ids is not None for ids in token_ids) and all(
        ids is not None or not text for ids, text in zip(token_ids, has_text, strict=True)
    ):
        return [len(ids or ()) for ids in token_ids], None
    counts = [1 if text else 0 for text in has_text]
    if completion_tokens is None:
        return counts, (
            "no usage and no per-chunk token ids: each chunk with text counted 1 (not tokens)"
        )
    if counts:
        counts[-1] = max(0, completion_tokens - sum(counts[:-1]))
    return counts, (
        "the server did not say how many tokens each chunk carried: each with text counted 1, "
        "one without text 0, the last the rest of usage.completion_tokens"
    )

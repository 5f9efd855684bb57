"""Stop strings in a static ``generate()`` batch: transformers' own ``StopStringCriteria`` stops
each row at the token that completes one of the batch's stop strings, and llem records at which
generated token it did, so that the row's output tokens end there.

The record matters because a row that stopped is padded after its stop with the pad token,
which is often the EOS token: counting "up to and including the first EOS" would count one pad,
and a pad that is not EOS would be counted to the batch's end. The recorder holds, per row, the
number of generated tokens when the criterion first said "stop" (on the device, without a
synchronisation per step). Beam search reorders rows between steps, so there the stop is found
in the decoded text instead (``llem.backends.stops.stop_index``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llem.backends.batching import count_output_tokens
from llem.backends.stops import LENGTH, STOP, stop_index


def stop_criterion(tokenizer: Any, stops: Sequence[str]) -> Any:
    """transformers' ``StopStringCriteria`` for ``stops``. Building one reads and sorts the whole
    vocabulary (tens of ms for 150k tokens), so the backend builds it once per set of stop
    strings, before the measured window, and reuses it (it keeps no state between calls)."""
    from transformers import StopStringCriteria

    return StopStringCriteria(tokenizer=tokenizer, stop_strings=list(stops))


class StopRecorder:
    """A stopping criterion for ``generate(stopping_criteria=...)``: transformers'
    ``StopStringCriteria`` (``inner``), which also records where each row stopped."""

    def __init__(self, inner: Any, prompt_width: int) -> None:
        self.inner = inner
        self.prompt_width = prompt_width
        self.stopped_at: Any = None  # per row: generated tokens at the stop, 0 while none

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = self.inner(input_ids, scores, **kwargs)
        if self.stopped_at is None:
            self.stopped_at = torch.zeros(input_ids.shape[0], dtype=torch.long, device=done.device)
        generated = input_ids.shape[1] - self.prompt_width
        first = (self.stopped_at == 0) & done
        self.stopped_at = torch.where(first, generated, self.stopped_at)
        return done


def generate_stop_kwargs(
    tokenizer: Any, stops: Sequence[str], criterion: Any, prompt_width: int, beams: int
) -> tuple[dict[str, Any], StopRecorder | None]:
    """``generate()`` keyword arguments that stop each row at ``stops`` (none when empty;
    ``criterion`` is their ``stop_criterion``), and the recorder that says where (None under
    beam search: ``stop_strings`` directly)."""
    if not stops:
        return {}, None
    if beams > 1:
        return {"stop_strings": list(stops), "tokenizer": tokenizer}, None
    from transformers import StoppingCriteriaList

    recorder = StopRecorder(criterion, prompt_width)
    return {"stopping_criteria": StoppingCriteriaList([recorder])}, recorder


def count_to_stops(
    new_tokens: Any,
    eos_ids: Sequence[int],
    tokenizer: Any,
    stops: Sequence[str],
    recorder: StopRecorder | None,
) -> tuple[list[int], list[str | None]]:
    """Each row's output tokens (up to and including its first EOS or the token that completed
    a stop string, whichever came first; no padding) and why it ended ("stop" or "length")."""
    counts = count_output_tokens(new_tokens, eos_ids)
    width = int(new_tokens.shape[1])
    if recorder is not None and recorder.stopped_at is not None:
        at = [int(n) for n in recorder.stopped_at.tolist()]
    elif stops:
        at = [stop_index(tokenizer, row.tolist(), stops) or 0 for row in new_tokens]
    else:
        at = [0] * len(counts)
    eos = set(eos_ids)
    out: list[int] = []
    reasons: list[str | None] = []
    for row, n, stop in zip(new_tokens, counts, at, strict=True):
        real = min(n, stop) if stop > 0 else n
        ended = stop > 0 or (real > 0 and int(row[real - 1]) in eos)
        out.append(real)
        reasons.append(STOP if ended or real < width else LENGTH)
    return out, reasons

"""Batch plumbing for decoder-only generation: left padding, exact output-token counts, and
per-step timestamps. Plain torch tensor helpers, independent of how the model was loaded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any


def count_output_tokens(new_tokens: Any, eos_ids: Sequence[int]) -> list[int]:
    """Generated tokens per row, up to and including the first EOS; padding after it not counted."""
    import torch

    n_rows, width = new_tokens.shape
    if width == 0:
        return [0] * n_rows
    if not eos_ids:
        return [width] * n_rows
    eos = torch.tensor(list(eos_ids), device=new_tokens.device)
    is_eos = torch.isin(new_tokens, eos)
    has_eos = is_eos.any(dim=1)
    first = is_eos.int().argmax(dim=1)
    counts = torch.where(has_eos, first + 1, torch.full_like(first, width))
    return [int(c) for c in counts.tolist()]


def left_pad(token_lists: Sequence[Sequence[int]], pad_id: int) -> tuple[Any, Any]:
    """Left-padded ``input_ids`` and ``attention_mask`` for a decoder-only batch."""
    import torch

    width = max(len(t) for t in token_lists)
    ids = torch.full((len(token_lists), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(token_lists), width), dtype=torch.long)
    for row, tokens in enumerate(token_lists):
        if tokens:
            ids[row, width - len(tokens) :] = torch.tensor(list(tokens), dtype=torch.long)
            mask[row, width - len(tokens) :] = 1
    return ids, mask


class StepClock:
    """Timestamps each decoding step as its tokens reach the host.

    Used as a transformers streamer (``put`` is called with the prompt, then once per step with the
    new tokens, right after they are copied to the host, which waits for the device), or, for beam
    search where streamers are not allowed, as a logits processor (called once per step; it
    synchronises CUDA itself).
    """

    def __init__(self, cuda: bool = False) -> None:
        self.cuda = cuda
        self.times: list[float] = []
        self.tokens: list[int] = []
        self._seen_prompt = False

    # streamer protocol
    def put(self, value: Any) -> None:
        now = time.perf_counter()
        if not self._seen_prompt:
            self._seen_prompt = True
            return
        self.times.append(now)
        self.tokens.append(int(value.shape[-1]) if value.dim() > 1 else 1)

    def end(self) -> None:
        pass

    # logits-processor protocol
    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self.times.append(time.perf_counter())
        self.tokens.append(1)
        return scores

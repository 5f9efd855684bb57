"""Request timelines of ``generate`` batches, so offline runs get the serving figures too (see
``llem.figures.serving`` for the definitions), and what their TTFT is measured from.

A request of a ``generate`` batch is sent when its batch starts, so its TTFT runs from there. What
that means depends on how the prompts were cut into batches (``latency.ttft_origin``):

- ``"batch start"``: batches of fewer than all the prompts (PyTorch static batches of
  ``pytorch.batch_size``): a request's TTFT leaves out the time it waited for earlier batches;
- ``"all prompts at once"``: every batch holds every prompt (vLLM's offline ``generate``, which
  hands all N prompts to the engine and lets it schedule ``vllm.max_num_seqs`` at a time; PyTorch
  with a batch of all the prompts): a request's TTFT includes its wait in the engine's queue.

Served workloads (``Backend.serve``) time each request from its own send: ``"actual send"``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from llem.vocabulary.workload import BatchOutput, RequestTimeline

ACTUAL_SEND = "actual send"
BATCH_START = "batch start"
ALL_AT_ONCE = "all prompts at once"


def batches_ttft_origin(batches: Sequence[BatchOutput], n_prompts: int) -> str:
    """What the TTFT of ``generate`` batches is measured from (see the module docstring)."""
    if batches and all(len(b.output_tokens) >= n_prompts for b in batches):
        return ALL_AT_ONCE
    return BATCH_START


def timelines_from_batches(batches: Sequence[BatchOutput], n_prompts: int) -> list[RequestTimeline]:
    """Timelines of ``generate`` batches (static PyTorch batches, vLLM's offline generate): every
    request arrives and is sent at its batch's start (nothing schedules it: ``scheduled_s`` is
    None). Requests are numbered in
    order over the batches; the prompt index cycles through the ``n_prompts`` prompts the way
    the run's passes do."""
    out: list[RequestTimeline] = []
    for b in batches:
        chunks = _batch_chunks(b)
        reasons = b.finish_reasons or [None] * len(b.input_tokens)
        for (times, tokens), n_in, reason in zip(chunks, b.input_tokens, reasons, strict=True):
            i = len(out)
            out.append(
                RequestTimeline(
                    request_id=i,
                    prompt_index=i % n_prompts if n_prompts > 0 else i,
                    arrival_s=b.start_s,
                    scheduled_s=None,
                    sent_s=b.start_s,
                    chunk_times_s=times,
                    chunk_tokens=tokens,
                    input_tokens=n_in,
                    finish_reason=reason,
                )
            )
    return out


def _batch_chunks(b: BatchOutput) -> list[tuple[list[float], list[int]]]:
    """Each request's (chunk times, chunk tokens) in a batch."""
    if b.request_step_times_s is not None and b.request_step_tokens is not None:
        return [
            (list(times), list(tokens))
            for times, tokens in zip(b.request_step_times_s, b.request_step_tokens, strict=True)
        ]
    cumulative = list(itertools.accumulate(b.step_tokens))
    out: list[tuple[list[float], list[int]]] = []
    for n in b.output_tokens:
        times: list[float] = []
        tokens: list[int] = []
        for j, total in enumerate(cumulative):
            if n <= 0 or j >= len(b.step_times_s):
                break
            times.append(b.step_times_s[j])
            tokens.append(min(total, n) - (cumulative[j - 1] if j else 0))
            if total >= n:
                break
        out.append((times, tokens))
    return out

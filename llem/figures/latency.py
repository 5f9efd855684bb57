"""Per-request latency from per-step timestamps: TTFT, inter-token latency, request latency.

result.json's latency figures come from ``llem.figures.serving`` (vLLM ``bench serve``'s
definitions); ``LatencySamples`` below spreads a step over its tokens, which is the definition of
``latency.itl_per_token_ms``, not of ``latency.itl_ms``. ``percentiles`` is shared by both.

Every request in a batch starts when its ``generate()`` call starts. Step ``j`` adds
``step_tokens[j]`` tokens to every unfinished request and lands at ``step_times_s[j]``. A request
that generated ``n`` tokens (up to and including its EOS) therefore received its first token at the
first step and its last token at the step where the running token count reaches ``n``.

- TTFT (ms): first step time - batch start (prefill plus the first decode).
- ITL per token (ms): for each later step within the request's lifetime, the step's duration
  divided by the tokens it added (so prompt-lookup steps that add several tokens count each
  token once).
- request latency (s): the request's last step time - batch start.

Engines with continuous batching (vllm) report each request's own arrival times and token counts
(``BatchOutput.request_step_times_s`` / ``request_step_tokens``); the definitions are the same,
applied to each request's own timeline, every request starting when the batch is handed over.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

from llem.vocabulary.workload import BatchOutput

PERCENTILES = (50, 90, 99)


@dataclass
class LatencySamples:
    ttft_s: list[float] = field(default_factory=list)
    itl_s: list[float] = field(default_factory=list)
    request_s: list[float] = field(default_factory=list)

    def add_batch(self, batch: BatchOutput) -> None:
        if batch.request_step_times_s is not None:
            self._add_requests(batch)
            return
        if not batch.step_times_s:
            return
        cumulative = list(itertools.accumulate(batch.step_tokens))
        for n in batch.output_tokens:
            if n <= 0:
                continue
            last = next((j for j, c in enumerate(cumulative) if c >= n), len(cumulative) - 1)
            self.ttft_s.append(batch.step_times_s[0] - batch.start_s)
            self.request_s.append(batch.step_times_s[last] - batch.start_s)
            for j in range(1, last + 1):
                step = batch.step_times_s[j] - batch.step_times_s[j - 1]
                self.itl_s.extend([step / batch.step_tokens[j]] * batch.step_tokens[j])

    def _add_requests(self, batch: BatchOutput) -> None:
        """Per-request timelines (continuous batching): the same definitions, request by request."""
        for times, tokens in zip(
            batch.request_step_times_s or [], batch.request_step_tokens or [], strict=True
        ):
            if not times:
                continue
            self.ttft_s.append(times[0] - batch.start_s)
            self.request_s.append(times[-1] - batch.start_s)
            for j in range(1, len(times)):
                self.itl_s.extend([(times[j] - times[j - 1]) / tokens[j]] * tokens[j])


def percentiles(values: Iterable[float], scale: float = 1.0) -> dict[str, float] | None:
    """``{"p50", "p90", "p99"}`` (linear interpolation), or None when there are no values."""
    data = sorted(v * scale for v in values)
    if not data:
        return None
    out = {}
    for q in PERCENTILES:
        pos = (len(data) - 1) * q / 100.0
        lo = int(pos)
        hi = min(lo + 1, len(data) - 1)
        out[f"p{q}"] = data[lo] + (data[hi] - data[lo]) * (pos - lo)
    return out


def decode_time_and_steps(batches: Iterable[BatchOutput]) -> tuple[float, int]:
    """Seconds spent in decode steps (after the first token) and how many such steps ran."""
    seconds, steps = 0.0, 0
    for b in batches:
        if len(b.step_times_s) > 1:
            seconds += b.step_times_s[-1] - b.step_times_s[0]
            steps += len(b.step_times_s) - 1
    return seconds, steps

"""vLLM's offline engine (``vllm.LLM``): its default arguments, and one batch handed to it at
once and stepped to the end.

The engine schedules the requests itself (continuous batching, up to ``vllm.max_num_seqs`` at a
time), as it does when deployed. llem steps the engine (``LLMEngine.step``) with
``RequestOutputKind.DELTA`` outputs and timestamps each request's tokens as they reach this
process, so TTFT, ITL and request latency are per request (vLLM 0.32 fills
``RequestOutput.metrics`` only with stats logging on, which llem leaves off). Each step's
scheduled tokens place its prefill chunks (``llem.backends.vllm.steps``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llem.backends.tokens import token_lists
from llem.backends.vllm.kwargs import Sections, request_sampling_kwargs
from llem.backends.vllm.serve import render_prompts
from llem.backends.vllm.speculation import VLLMSpeculation, count_requests, count_step
from llem.backends.vllm.steps import (
    OfflineSteps,
    offline_clock,
    scheduled_tokens,
    watch_scheduler_stats,
)
from llem.errors import RunError, first_line
from llem.vocabulary.workload import BatchOutput, Prompt

#: Engine arguments the offline engine sets unless the user did (``vllm.engine_kwargs``): the
#: engine core's per-step statistics with the scheduler's iteration details, so that each step's
#: scheduled prompt tokens place prefill chunks (``llem.backends.vllm.chunks``). vLLM's default
#: stat loggers stay silent (they log at INFO; llem keeps vLLM at WARNING).
OFFLINE_DEFAULTS: dict[str, Any] = {
    "disable_log_stats": False,
    "enable_logging_iteration_details": True,
}


def offline_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The engine arguments with the offline engine's defaults under them."""
    return {**OFFLINE_DEFAULTS, **kwargs}


def generate_offline(
    llm: Any,
    tokenizer: Any,
    prompts: Sequence[Prompt],
    sections: Sections,
    name: str,
    max_model_len: int | None,
    speculation: VLLMSpeculation | None,
) -> BatchOutput:
    """Every prompt handed to ``llm``'s engine at once (request ids ``<name>-<i>``), stepped
    until all are done; ``speculation`` counts the speculative tokens of its steps."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    engine = llm.llm_engine
    tokens = token_lists(tokenizer, prompts)
    params = [  # each with its prompt's stop strings
        SamplingParams(**request_sampling_kwargs(sections, p), output_kind=RequestOutputKind.DELTA)
        for p in prompts
    ]
    inputs = render_prompts(engine, tokens, max_model_len)
    ids = [f"{name}-{i}" for i in range(len(tokens))]
    start = time.perf_counter()
    steps_log = OfflineSteps(start)
    try:
        for rid, engine_input, request_params in zip(ids, inputs, params, strict=True):
            engine.add_request(rid, engine_input, request_params)
        run = _step_until_done(engine, ids, steps_log, sections.save_outputs, speculation)
    except Exception as exc:
        engine.abort_request(ids)
        raise RunError(f"vLLM generation failed: {type(exc).__name__}: {first_line(exc)}") from exc
    end = time.perf_counter()
    steps, placement = steps_log.engine_steps(
        _prefill(tokens, run.cached), [len(t) for t in tokens]
    )
    return BatchOutput(
        start_s=start,
        end_s=end,
        input_tokens=[len(t) for t in tokens],
        output_tokens=[sum(c) for c in run.counts],
        step_times_s=run.steps,
        step_tokens=[1] * len(run.steps),
        request_step_times_s=run.times,
        request_step_tokens=run.counts,
        cached_input_tokens=run.cached,
        texts=run.texts,
        steps=steps,
        step_clock=f"{offline_clock()}; {placement.note}",
        shares_estimated=placement.unplaced and placement.note,
        finish_reasons=run.reasons,
    )


def _prefill(tokens: list[list[int]], cached: list[int] | None) -> list[int]:
    """Prompt tokens each request computed: its prompt less its prefix-cache hits."""
    hits = cached if cached is not None else [0] * len(tokens)
    return [len(t) - c for t, c in zip(tokens, hits, strict=True)]


@dataclass
class _Stepped:
    """What stepping the engine to the end gave: per request its token arrival times and
    counts, its prefix-cache hits (None if any was not reported) and its text (None unless
    asked for); the times of the steps that produced any token."""

    times: list[list[float]]
    counts: list[list[int]]
    steps: list[float]
    cached: list[int] | None
    texts: list[str] | None
    reasons: list[str | None]  # vLLM's finish_reason ("stop": EOS or a stop string; "length")


def _step_until_done(
    engine: Any,
    ids: list[str],
    steps_log: OfflineSteps,
    keep_text: bool = False,
    speculation: VLLMSpeculation | None = None,
) -> _Stepped:
    """Step the engine until every request is done (``RequestOutput.num_cached_tokens`` gives
    the prefix-cache hits). Each step's tokens per request and the scheduler's totals (where the
    engine reports them) go to ``steps_log``; its speculative counters to ``speculation``."""
    index = {rid: i for i, rid in enumerate(ids)}
    times: list[list[float]] = [[] for _ in ids]
    counts: list[list[int]] = [[] for _ in ids]
    texts: list[list[str]] = [[] for _ in ids]
    cached: list[int | None] = [None for _ in ids]
    reasons: list[str | None] = [None for _ in ids]
    steps: list[float] = []
    metrics: list[Any] = [None for _ in ids]  # each request's spec_decode_metrics, at its end
    stats = watch_scheduler_stats(engine)
    while engine.has_unfinished_requests():
        outputs = engine.step()
        now = time.perf_counter()
        made = []
        for out in outputs:
            i = index[out.request_id]
            hits = getattr(out, "num_cached_tokens", None)
            if isinstance(hits, int):
                cached[i] = max(hits, cached[i] or 0)
            n = sum(len(c.token_ids) for c in out.outputs)
            if keep_text and out.outputs:
                texts[i].append(out.outputs[0].text)
            if out.outputs and out.outputs[0].finish_reason is not None:
                reasons[i] = str(out.outputs[0].finish_reason)
                metrics[i] = getattr(out.outputs[0], "spec_decode_metrics", None)
            if n:
                times[i].append(now)
                counts[i].append(n)
                made.append((i, n))
        if made:
            steps.append(now)
        scheduler = stats.pop()
        count_step(speculation, scheduler)
        steps_log.step(now, made, scheduled_tokens(scheduler))
    count_requests(speculation, metrics, counts)
    known = [c for c in cached if c is not None]
    return _Stepped(
        times=times,
        counts=counts,
        steps=steps,
        cached=known if len(known) == len(ids) else None,
        texts=["".join(t) for t in texts] if keep_text else None,
        reasons=reasons,
    )

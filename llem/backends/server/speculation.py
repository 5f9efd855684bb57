"""Speculative decoding on a server llem launches: the ``speculative`` group as the vLLM preset's
``--speculative-config`` JSON (``llem.backends.vllm.speculation.speculative_config``) or the
SGLang preset's flags (``llem.backends.server.sglang_speculation``), the refusal of every other
way to a server, and what the server's speculation did over the window, read from its Prometheus
``/metrics`` (``llem.backends.server.metrics``; SGLang's says too little: the section is null),
handed to the run as facts (``window_facts``), which writes the section and its ratios.

vLLM's server counts drafts (request-steps that verified proposals), draft tokens and accepted
tokens (``vllm:spec_decode_num_drafts_total`` and the like); the window's figures are each
counter's growth from the scrape's first poll (before the first request) to its last (after the
last answer). The server says nothing per request, nor how many target steps it ran: each step
of a request yields its accepted tokens and one of the target's own, so the target steps are the
generated tokens (``vllm:generation_tokens_total``'s growth) less the accepted ones.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from llem.backends.draft_vocabulary import draft_vocabulary_problem
from llem.backends.server import sglang_speculation
from llem.backends.server.metrics import MetricsSample, ServerMetrics
from llem.backends.vllm.speculation import GREEDY, MECHANISMS, SAMPLED, ngram_size
from llem.config.server import Launch, ServerConfig
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.result import SpeculativeSection
from llem.vocabulary.engine import BackendSections
from llem.vocabulary.facts import SectionFacts

SERVER_MECHANISM = "a launched vLLM server's --speculative-config, counted from its /metrics"
NOT_PER_REQUEST = "the server's /metrics counts speculation over all requests, not per request"
NO_POSITIONS = (
    "not read from the server's /metrics (vllm:spec_decode_num_accepted_tokens_per_pos is summed "
    "over its positions by llem's scrape)"
)


#: the presets llem maps the speculative group to
SPECULATIVE_LAUNCHES = (Launch.vllm, Launch.sglang)
CAN = "it can: server.launch=vllm or sglang, or speculative=none"


def refusal(sections: BackendSections[ServerConfig], device: str | None = None) -> str | None:
    """The pre-flight line refusing ``speculative=METHOD`` where llem cannot set the server's
    speculation (a running server, a preset other than vLLM's or SGLang's, ``server.args`` that
    set it too, a method SGLang cannot run on ``device``), or a draft of another vocabulary
    (``llem.backends.draft_vocabulary``); None where it can, or for speculative=none."""
    method = sections.speculative.method
    if method == SpeculativeMethod.none:
        return None
    c = sections.engine
    head = f"speculative={method.value}"
    if c.launch is None:
        why = "server.url names a running server, whose speculation llem cannot set"
        return f"{head}: {why} ({CAN})"
    if c.launch not in SPECULATIVE_LAUNCHES:
        return f"{head}: server.launch={c.launch.value} has no speculative mapping in llem ({CAN})"
    if c.launch == Launch.sglang:
        keys = sglang_speculation.conflicting_args(dict(c.args))
        if keys:
            return (
                f"{head} and server.args.{keys[0]} both set the server's speculation (use one: "
                "the speculative group, or speculative=none with the arguments)"
            )
        refused = sglang_speculation.method_refusal(sections.speculative, device)
        if refused is not None:
            return refused
    elif "speculative_config" in c.args:
        return (
            f"{head} and server.args.speculative_config both set the server's speculation "
            "(use one: the speculative group, or speculative=none with the argument)"
        )
    return draft_vocabulary_problem(sections)


def launch_args(spec: SpeculativeConfig, draft: str | None) -> dict[str, Any]:
    """The vLLM preset's arguments for ``spec``: ``speculative_config`` as JSON (none for
    speculative=none)."""
    from llem.backends.vllm.speculation import speculative_config

    config = speculative_config(spec, draft)
    return {} if config is None else {"speculative_config": json.dumps(config, sort_keys=True)}


def _growth(first: MetricsSample, last: MetricsSample, name: str) -> int | None:
    a, b = getattr(first, name), getattr(last, name)
    return None if a is None or b is None else round(b - a)


def window_facts(
    metrics: ServerMetrics, spec: SpeculativeConfig, do_sample: bool, requests: int
) -> SectionFacts:
    """The ``speculative`` section from the window's first and last /metrics samples; null with
    the reason where the server's counters were not read."""
    method = spec.method
    if metrics.family == "sglang":
        return SectionFacts(None, {"speculative": sglang_speculation.null_reason(method, metrics)})
    samples = metrics.samples
    first, last = (samples[0], samples[-1]) if len(samples) >= 2 else (None, None)
    names = ("spec_drafts_total", "spec_draft_tokens_total", "spec_accepted_tokens_total")
    grown = [_growth(first, last, n) for n in names] if first and last else [None] * 3
    tokens = _growth(first, last, "generation_tokens_total") if first and last else None
    drafts, proposed, accepted = grown
    if drafts is None or proposed is None or accepted is None or tokens is None:
        why = metrics.reason or "the server's /metrics carries no vllm:spec_decode_* counters"
        return SectionFacts(
            None,
            {
                "speculative": f"speculative={method.value}: the server's speculative counters "
                f"were not read over the window ({why})"
            },
        )
    steps = tokens - accepted
    section = SpeculativeSection(
        method=method.value,
        mechanism=f"{MECHANISMS[method]}; {SERVER_MECHANISM}",
        verification=SAMPLED if do_sample else GREEDY,
        num_tokens=spec.num_tokens,
        ngram_size=ngram_size(spec),
        draft_model=spec.draft_model,
        requests=requests,
        draft_tokens_proposed=proposed,
        draft_tokens_accepted=accepted,
        target_steps=steps,
        steps_with_proposals=drafts,
        tokens_generated=tokens,
        target_steps_saved=accepted,
    )
    reasons = {
        f"speculative.request_draft_tokens_{name}": NOT_PER_REQUEST
        for name in ("proposed", "accepted")
    }
    reasons["speculative.request_target_steps"] = NOT_PER_REQUEST
    reasons["speculative.draft_tokens_accepted_per_position"] = NO_POSITIONS
    return SectionFacts(dataclasses.asdict(section), reasons)

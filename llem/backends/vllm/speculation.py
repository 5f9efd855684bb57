"""Speculative decoding on the vLLM engine: the ``speculative`` group mapped to vLLM's
``speculative_config`` (in process, and as a launched vLLM server's ``--speculative-config``), and
what speculation did, counted from vLLM's own counters.

vLLM's scheduler counts each step's speculation (``SpecDecodingStats`` on the step's
``SchedulerStats``): drafts (request-steps that verified proposals), draft tokens, accepted tokens
and accepted tokens per draft position. With ``per_request_spec_decode_metrics="summary"`` it also
hands each finished request its own (``CompletionOutput.spec_decode_metrics``: the proposed draft
tokens and a histogram of accepted counts per verification). llem sums both over the measured
window (never the warm-up's), and counts the target steps itself: each engine step in which a
request received tokens is one verification of that request.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.result import SpeculativeSection
from llem.vocabulary.facts import SectionFacts

#: vLLM's n-gram proposer matches n-grams from ``prompt_lookup_min`` to ``prompt_lookup_max``
#: tokens long; llem passes 1 as the shortest, as transformers' prompt lookup matches down to one.
NGRAM_MIN = 1
#: transformers' default longest n-gram (``max_matching_ngram_size``), used when
#: ``speculative.ngram_size`` is unset so both engines match the same n-grams (vLLM's own
#: default is 5 to 5).
NGRAM_MAX_DEFAULT = 2

MECHANISMS = {
    SpeculativeMethod.ngram: "vLLM n-gram proposer (speculative_config method ngram)",
    SpeculativeMethod.draft: "vLLM draft model (speculative_config method draft_model)",
}
GREEDY = "greedy: proposals kept while each equals the target's argmax (vLLM's rejection sampler)"
SAMPLED = (
    "sampling: vLLM's rejection sampler (rejection_sample_method standard: a proposal kept with "
    "probability min(1, target / draft), an n-gram's draft probability taken as 1; the output "
    "distribution is the target's)"
)
NO_REQUEST_METRICS = (
    "vLLM handed no per-request speculative metrics (CompletionOutput.spec_decode_metrics) for "
    "some of the window's requests"
)


def ngram_size(spec: SpeculativeConfig) -> int | None:
    """The longest n-gram vLLM matches for ``spec`` (None for another method)."""
    if spec.method != SpeculativeMethod.ngram:
        return None
    return spec.ngram_size or NGRAM_MAX_DEFAULT


def speculative_config(spec: SpeculativeConfig, draft: str | None = None) -> dict[str, Any] | None:
    """vLLM's ``speculative_config`` for ``spec`` (None for speculative=none); ``draft``: where
    the draft model loads from (a resolved path), ``spec.draft_model`` when not given."""
    if spec.method == SpeculativeMethod.ngram:
        return {
            "method": "ngram",
            "num_speculative_tokens": spec.num_tokens,
            "prompt_lookup_max": ngram_size(spec),
            "prompt_lookup_min": NGRAM_MIN,
        }
    if spec.method == SpeculativeMethod.draft:
        return {
            "method": "draft_model",
            "model": draft or spec.draft_model,
            "num_speculative_tokens": spec.num_tokens,
        }
    return None


def engine_kwargs(spec: SpeculativeConfig, draft: str | None = None) -> dict[str, Any]:
    """The engine arguments speculation adds: its config and per-request metrics (empty for
    speculative=none)."""
    config = speculative_config(spec, draft)
    if config is None:
        return {}
    return {"speculative_config": config, "per_request_spec_decode_metrics": "summary"}


def speculative_facts(counted: VLLMSpeculation | None) -> SectionFacts | None:
    """The ``speculative`` section from the window's count; None for speculative=none."""
    return None if counted is None else counted.facts()


def count_step(counted: VLLMSpeculation | None, scheduler_stats: Any) -> None:
    """Add one engine step's counters to ``counted`` (nothing when the run does not count)."""
    if counted is not None:
        counted.step(scheduler_stats)


def count_requests(
    counted: VLLMSpeculation | None, metrics: list[Any], step_tokens: list[list[int]]
) -> None:
    """Add the batch's requests, in their order: each one's ``spec_decode_metrics`` and the
    tokens it received per step (nothing when the run does not count)."""
    if counted is None:
        return
    for m, tokens in zip(metrics, step_tokens, strict=True):
        counted.request(m, tokens)


def new_vllm_speculation(sections: Any) -> VLLMSpeculation | None:
    """A fresh count for the run's window; None for speculative=none."""
    spec: SpeculativeConfig = sections.speculative
    if spec.method == SpeculativeMethod.none:
        return None
    return VLLMSpeculation(spec, bool(sections.decoder.do_sample))


@dataclass
class VLLMSpeculation:
    """One run's speculation on vLLM, summed over the measured window's steps and requests."""

    spec: SpeculativeConfig
    do_sample: bool
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_position: list[int] = field(default_factory=list)
    request_proposed: list[int | None] = field(default_factory=list)
    request_accepted: list[int | None] = field(default_factory=list)
    request_steps: list[int] = field(default_factory=list)
    tokens: int = 0  # output tokens of the window's requests

    def step(self, scheduler_stats: Any) -> None:
        """Add one engine step's ``SchedulerStats.spec_decoding_stats`` (none: no verification)."""
        s = getattr(scheduler_stats, "spec_decoding_stats", None)
        if s is None:
            return
        self.drafts += int(s.num_drafts)
        self.draft_tokens += int(s.num_draft_tokens)
        self.accepted += int(s.num_accepted_tokens)
        per = [int(n) for n in s.num_accepted_tokens_per_pos]
        if len(self.accepted_per_position) < len(per):
            self.accepted_per_position += [0] * (len(per) - len(self.accepted_per_position))
        for i, n in enumerate(per):
            self.accepted_per_position[i] += n

    def request(self, metrics: Any, step_tokens: list[int]) -> None:
        """One finished request: vLLM's ``spec_decode_metrics`` (None where it gave none) and
        the tokens it received in each engine step (a step each)."""
        self.request_steps.append(len(step_tokens))
        self.tokens += sum(step_tokens)
        if metrics is None:
            self.request_proposed.append(None)
            self.request_accepted.append(None)
            return
        self.request_proposed.append(int(metrics.num_draft_tokens))
        self.request_accepted.append(sum(j * int(n) for j, n in enumerate(metrics.histogram)))

    def facts(self) -> SectionFacts:
        """The ``speculative`` section (``llem.result.speculative``) as counted, for the run to
        write with its ratios."""
        steps = sum(self.request_steps)
        method = self.spec.method
        known = None not in self.request_proposed
        section = SpeculativeSection(
            method=method.value,
            mechanism=MECHANISMS[method],
            verification=SAMPLED if self.do_sample else GREEDY,
            num_tokens=self.spec.num_tokens,
            ngram_size=ngram_size(self.spec),
            draft_model=self.spec.draft_model,
            requests=len(self.request_steps),
            draft_tokens_proposed=self.draft_tokens,
            draft_tokens_accepted=self.accepted,
            target_steps=steps,
            steps_with_proposals=self.drafts,
            tokens_generated=self.tokens,
            target_steps_saved=self.tokens - steps,
            request_draft_tokens_proposed=[int(n or 0) for n in self.request_proposed]
            if known
            else [],
            request_draft_tokens_accepted=[int(n or 0) for n in self.request_accepted]
            if known
            else [],
            request_target_steps=list(self.request_steps),
            draft_tokens_accepted_per_position=list(self.accepted_per_position),
        )
        reasons = (
            {}
            if known
            else {
                f"speculative.{name}": NO_REQUEST_METRICS
                for name in ("request_draft_tokens_proposed", "request_draft_tokens_accepted")
            }
        )
        return SectionFacts(dataclasses.asdict(section), reasons)

"""result.json's ``speculative`` section: what speculative decoding did in the measured window.

Counted in the engine's own generation loop (the PyTorch engine: around transformers' candidate
generator, ``llem.backends.pytorch.speculation``), over the window's requests only (never the
warm-up's). Each verification step is one forward pass of the target model over the prompt or the
last token and the step's proposals; it keeps the proposals its own decoding would have chosen,
in order, up to the first it would not (greedy: the target's argmax), and adds one token of its own.
So a step yields ``accepted + 1`` tokens, and ``tokens_generated = draft_tokens_accepted +
target_steps``; plain decoding takes one target step per token.

- ``draft_tokens_proposed``, ``draft_tokens_accepted``: summed over the window's requests (the
  ``request_*`` lists: per request, in the order of requests.jsonl).
- ``acceptance_rate``: accepted / proposed (null with the reason when nothing was proposed).
- ``mean_accepted_tokens_per_step``: accepted / target steps (proposals kept per verification).
- ``tokens_per_target_step``: tokens generated / target steps (1 for plain decoding; vLLM calls
  it the mean acceptance length).
- ``target_steps_saved``: tokens generated - target steps (the target passes one token per step
  would have added).

A run with ``speculative=none`` has a null section, its reason under ``"speculative"`` in
``null_reasons``; so has every file written before the section existed. Added without a schema
version of its own (it defaults to null, so older files load unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llem.result.figure import figure, figure_specs


@dataclass(frozen=True)
class SpeculativeSection:
    method: str  # ngram | draft (the speculative group's method)
    mechanism: str  # the engine's own mechanism, in one phrase
    verification: str  # how proposals were accepted (greedy match, or sampling's rule)
    num_tokens: int  # proposed per step, at most
    ngram_size: int | None = None  # ngram: the longest n-gram matched (null: engine default)
    draft_model: str | None = None  # draft: the draft model's name or path
    requests: int = 0
    draft_tokens_proposed: int = 0
    draft_tokens_accepted: int = 0
    target_steps: int = 0  # verification steps: target forward passes in generation
    steps_with_proposals: int = 0  # of those, steps with at least one proposed token
    tokens_generated: int = 0  # tokens the generation loop appended (accepted + target steps)
    target_steps_saved: int = 0  # tokens_generated - target_steps
    acceptance_rate: float | None = figure()
    mean_accepted_tokens_per_step: float | None = figure()
    tokens_per_target_step: float | None = figure()
    request_draft_tokens_proposed: list[int] = field(default_factory=list)
    request_draft_tokens_accepted: list[int] = field(default_factory=list)
    request_target_steps: list[int] = field(default_factory=list)


figure_specs(SpeculativeSection)

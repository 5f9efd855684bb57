"""Speculative decoding on the PyTorch engine: the ``speculative`` group mapped to transformers'
prompt lookup and assisted generation, the draft model's load, and what speculation did, counted
in ``generate``'s own loop.

transformers' assisted decoding (``GenerationMixin._assisted_decoding``, 5.x) asks a candidate
generator for each step's proposals (``get_candidates``), verifies them in one target forward pass,
and tells the generator how many it kept (``update_candidate_strategy(input_ids, scores,
num_matches)``, after cropping at EOS and the length budget). ``counting`` wraps the generator
the model builds for one ``generate`` call, for that call only, and reads both: the proposals are
the candidate ids past the input, the accepted count is ``num_matches``, the tokens the step
appended are the input's growth between the two calls. Nothing the generator returns is changed,
so the output is the same as without the count.

It also records when each draft ran (``DRAFT_CLOCK``): the start and end of each
``get_candidates`` call, and the verification from that end to the next
``update_candidate_strategy`` call (the target's forward pass over the candidates, the first with
the prompt's prefill, and its acceptance). Both edges wait for the device already: transformers
reads each draft's candidates and each verdict on the host (prompt lookup's matches and the
assistant's stopping test; the verdict's EOS search and the streamer's copy) before the call
returns or is made, so the spans need no synchronisation of their own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.errors import RunError, first_line
from llem.result import SpeculativeSection
from llem.vocabulary.facts import SectionFacts
from llem.vocabulary.speculation import DraftSpans, Span

MECHANISMS = {
    SpeculativeMethod.ngram: "transformers prompt lookup (prompt_lookup_num_tokens)",
    SpeculativeMethod.draft: "transformers assisted generation (assistant_model)",
}
DRAFT_CLOCK = (
    "time.perf_counter in llem's process: a draft from the candidate generator's "
    "get_candidates call to its return, its verification from there to the "
    "update_candidate_strategy call that follows"
)
GREEDY = "greedy: proposals kept while each equals the target's argmax"
SAMPLED_NGRAM = "sampling: proposals kept while each equals the token sampled from the target"
SAMPLED_DRAFT = (
    "sampling: speculative sampling's rejection rule (the draft's and the target's "
    "probabilities; the output distribution is the target's)"
)


@dataclass
class RequestCount:
    """One request's speculation (one ``generate`` call of one prompt)."""

    proposed: int = 0  # draft tokens proposed
    accepted: int = 0  # of those, kept by the target
    steps: int = 0  # verification steps: target forward passes
    with_proposals: int = 0  # steps with at least one proposal
    generated: int = 0  # tokens the loop appended (accepted + one per step)
    per_position: list[int] = field(default_factory=list)  # accepted at each draft position
    draft_spans: list[Span] = field(default_factory=list)  # each get_candidates call (s)
    verification_spans: list[Span] = field(default_factory=list)  # its end to the verdict (s)


def draft_key(spec: SpeculativeConfig) -> str | None:
    """What of ``spec`` the load depends on (the draft model loads with the target)."""
    return spec.draft_model if spec.method == SpeculativeMethod.draft else None


def new_speculation(sections: Any) -> Speculation | None:
    """A fresh count for the run's window; None for speculative=none."""
    spec: SpeculativeConfig = sections.speculative
    if spec.method == SpeculativeMethod.none:
        return None
    return Speculation(spec, bool(sections.decoder.do_sample), [])


def generate_kwargs(spec: SpeculativeConfig, draft: Any) -> dict[str, Any]:
    """``generate`` keyword arguments for ``spec`` (empty for speculative=none)."""
    if spec.method == SpeculativeMethod.ngram:
        kwargs: dict[str, Any] = {"prompt_lookup_num_tokens": spec.num_tokens}
        if spec.ngram_size is not None:
            kwargs["max_matching_ngram_size"] = spec.ngram_size
        return kwargs
    if spec.method == SpeculativeMethod.draft:
        return {"assistant_model": draft}
    return {}


def load_draft(spec: SpeculativeConfig, target: Any, tokenizer: Any, device: str) -> Any:
    """The draft model of speculative=draft, in the target's dtype and on its device, proposing
    exactly ``speculative.num_tokens`` per step (a constant schedule, no confidence cut-off);
    None for another method. A draft whose tokenizer's vocabulary differs from the target's is
    refused: its proposals would be other tokens' ids."""
    if spec.method != SpeculativeMethod.draft or not spec.draft_model:
        return None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llem.backends.models import resolve_name_or_path

    path, _ = resolve_name_or_path(spec.draft_model)
    try:
        draft_tokenizer = AutoTokenizer.from_pretrained(path)
        draft = AutoModelForCausalLM.from_pretrained(path, dtype=target.dtype)
    except Exception as exc:
        raise RunError(
            f"could not load speculative.draft_model={spec.draft_model}: "
            f"{type(exc).__name__}: {first_line(exc)}"
        ) from exc
    if draft_tokenizer.get_vocab() != tokenizer.get_vocab():
        raise RunError(
            f"speculative.draft_model={spec.draft_model} does not share the target's tokenizer "
            "(their vocabularies differ); use a draft of the target's family"
        )
    where: Any = target.device if hasattr(target, "device") else device
    draft.to(where)
    draft.eval()
    gc = draft.generation_config
    gc.num_assistant_tokens = spec.num_tokens
    gc.num_assistant_tokens_schedule = "constant"
    gc.assistant_confidence_threshold = 0.0
    return draft


@contextlib.contextmanager
def counting(model: Any, count: RequestCount, on: bool = True) -> Iterator[None]:
    """Count into ``count`` what the candidate generator of every ``generate`` call of
    ``model`` inside the block proposes and gets accepted (nothing when not ``on``); the model
    is as it was afterwards."""
    if not on:
        yield
        return
    build = model._get_candidate_generator

    def counted(*args: Any, **kwargs: Any) -> Any:
        return _Counted(build(*args, **kwargs), count)

    model._get_candidate_generator = counted
    try:
        yield
    finally:
        del model._get_candidate_generator  # the class's method again


class _Counted:
    """A candidate generator that counts what passes through it and changes nothing."""

    def __init__(self, inner: Any, count: RequestCount) -> None:
        self._inner, self._count = inner, count
        self._length = 0
        self._drafted = 0.0  # when the last draft returned (perf_counter s)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_candidates(self, input_ids: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        candidates, logits = self._inner.get_candidates(input_ids, **kwargs)
        self._drafted = time.perf_counter()
        self._count.draft_spans.append((start, self._drafted))
        proposed = int(candidates.shape[1] - input_ids.shape[1])
        c = self._count
        c.steps += 1
        c.proposed += proposed
        c.with_proposals += proposed > 0
        self._length = int(input_ids.shape[1])
        return candidates, logits

    def update_candidate_strategy(self, input_ids: Any, scores: Any, num_matches: Any) -> Any:
        c = self._count
        c.verification_spans.append((self._drafted, time.perf_counter()))
        kept = int(num_matches)
        c.accepted += kept
        c.per_position += [0] * max(0, kept - len(c.per_position))
        for i in range(kept):
            c.per_position[i] += 1
        c.generated += int(input_ids.shape[1]) - self._length
        return self._inner.update_candidate_strategy(input_ids, scores, num_matches)


@dataclass
class Speculation:
    """One run's speculation: its settings, and a count per request of the measured window."""

    spec: SpeculativeConfig
    do_sample: bool
    requests: list[RequestCount]

    def facts(self) -> SectionFacts:
        """The ``speculative`` section (``llem.result.speculative``) as counted, for the run to
        write with its ratios."""
        c = self.requests
        proposed, accepted = sum(r.proposed for r in c), sum(r.accepted for r in c)
        steps, generated = sum(r.steps for r in c), sum(r.generated for r in c)
        method = self.spec.method
        sampled = SAMPLED_DRAFT if method == SpeculativeMethod.draft else SAMPLED_NGRAM
        section = SpeculativeSection(
            method=method.value,
            mechanism=MECHANISMS[method],
            verification=sampled if self.do_sample else GREEDY,
            num_tokens=self.spec.num_tokens,
            ngram_size=self.spec.ngram_size,
            draft_model=self.spec.draft_model,
            requests=len(c),
            draft_tokens_proposed=proposed,
            draft_tokens_accepted=accepted,
            target_steps=steps,
            steps_with_proposals=sum(r.with_proposals for r in c),
            tokens_generated=generated,
            target_steps_saved=generated - steps,
            request_draft_tokens_proposed=[r.proposed for r in c],
            request_draft_tokens_accepted=[r.accepted for r in c],
            request_target_steps=[r.steps for r in c],
            draft_tokens_accepted_per_position=_positions(c),
        )
        return SectionFacts(dataclasses.asdict(section))

    def spans(self) -> DraftSpans:
        """When each draft and its verification ran, over the window's requests in time order."""
        draft = sorted(s for r in self.requests for s in r.draft_spans)
        verification = sorted(s for r in self.requests for s in r.verification_spans)
        return DraftSpans(tuple(draft), tuple(verification), DRAFT_CLOCK)


def _positions(requests: list[RequestCount]) -> list[int]:
    """Accepted proposals at each draft position, summed over the requests."""
    width = max((len(r.per_position) for r in requests), default=0)
    return [
        sum(r.per_position[i] for r in requests if i < len(r.per_position)) for i in range(width)
    ]

"""A simulated continuous-batching engine: what it schedules in each step, as an engine reports it.

Each step has a budget of ``max_num_batched_tokens``. Running requests that have finished their
prefill decode one token each first; the rest of the budget goes to prefill, in chunks: requests
whose prefill is unfinished (oldest first), then waiting requests that have arrived (first come,
first served) while fewer than ``max_num_seqs`` run. A prompt longer than what is left of the
budget is prefilled over several steps (chunked prefill); the step that computes a request's
last prompt token also samples its first output token.

The KV cache holds ``kv_blocks`` blocks of ``block_tokens`` tokens. When a step's requests would
need more, the most recently admitted running request is preempted: its blocks are freed and it
goes back to the head of the queue, to recompute its prompt and the tokens it had generated as a
new prefill (vLLM's recompute preemption).

The step's duration comes from the GPU's physics (``gpu``), and a host gap (scheduling,
detokenising) separates steps. ``run_engine`` returns the steps (``EngineStep`` with shares: each
chunk's prefill tokens in the step that computed it) and, beside each, what the physics needs:
each request's context read (``Work``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from llem.vocabulary.workload import EngineStep, StepShare


@dataclass(frozen=True)
class Request:
    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class EngineSpec:
    max_num_batched_tokens: int = 512
    max_num_seqs: int = 32
    kv_blocks: int = 4096
    block_tokens: int = 16
    host_gap_s: tuple[float, float] = (0.0005, 0.002)  # uniform, seeded


@dataclass(frozen=True)
class Work:
    """What one request computed in a step: prompt tokens, decoded tokens, and the tokens of its
    KV cache that the step read (its context before the step)."""

    request_id: int
    prefill_tokens: int
    decode_tokens: int
    context_tokens: int


class Timing(Protocol):
    def duration_s(self, work: Sequence[Work]) -> float: ...


@dataclass
class _State:
    req: Request
    computed: int = 0  # tokens in the KV cache
    generated: int = 0  # output tokens sampled so far
    admitted: int = 0  # admission order (the last admitted is preempted first)

    @property
    def to_prefill(self) -> int:
        """Tokens still to prefill: the prompt and, after a preemption, the generated ones."""
        target = self.req.prompt_tokens + max(self.generated - 1, 0)
        return max(target - self.computed, 0)


@dataclass
class Trace:
    steps: list[EngineStep] = field(default_factory=list)
    work: list[tuple[Work, ...]] = field(default_factory=list)
    sampled: list[int] = field(default_factory=list)  # output tokens sampled by each step
    preemptions: int = 0
    chunked_requests: int = 0  # requests whose prompt took more than one step


def run_engine(requests: Sequence[Request], spec: EngineSpec, gpu: Timing, seed: int = 0) -> Trace:
    """The engine's steps over ``requests`` (module docstring), from time 0."""
    rng = random.Random(seed)
    waiting = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
    queue: list[_State] = []  # preempted requests, to resume first
    running: list[_State] = []
    trace, chunks, order = Trace(), dict[int, int](), 0
    t = min((r.arrival_s for r in requests), default=0.0)
    while waiting or queue or running:
        while waiting and waiting[0].arrival_s <= t:
            queue.append(_State(waiting.pop(0)))
        if not running and not queue:
            t = waiting[0].arrival_s
            continue
        order = _admit(queue, running, spec, order)
        work = _schedule(running, spec)
        while _blocks(running, work, spec) > spec.kv_blocks and len(running) > 1:
            victim = max(running, key=lambda s: s.admitted)
            running.remove(victim)
            victim.computed = 0
            queue.insert(0, victim)
            trace.preemptions += 1
            work = _schedule(running, spec)
        d = gpu.duration_s(work)
        shares = tuple(StepShare(w.request_id, w.prefill_tokens, w.decode_tokens) for w in work)
        trace.steps.append(EngineStep.of_shares(t, t + d, shares))
        trace.work.append(tuple(work))
        for w in work:
            chunks[w.request_id] = chunks.get(w.request_id, 0) + (w.prefill_tokens > 0)
        running, sampled = _advance(running, work)
        trace.sampled.append(sampled)
        t += d + rng.uniform(*spec.host_gap_s)
    trace.chunked_requests = sum(1 for n in chunks.values() if n > 1)
    return trace


def _admit(queue: list[_State], running: list[_State], spec: EngineSpec, order: int) -> int:
    while queue and len(running) < spec.max_num_seqs:
        s = queue.pop(0)
        order += 1
        s.admitted = order
        running.append(s)
    return order


def _schedule(running: Sequence[_State], spec: EngineSpec) -> list[Work]:
    """Decodes first, then prefill chunks, within the token budget."""
    budget = spec.max_num_batched_tokens
    work = []
    for s in running:
        if s.to_prefill == 0 and budget > 0:
            work.append(Work(s.req.request_id, 0, 1, s.computed))
            budget -= 1
    for s in sorted(running, key=lambda s: s.admitted):
        if s.to_prefill > 0 and budget > 0:
            chunk = min(s.to_prefill, budget)
            work.append(Work(s.req.request_id, chunk, 0, s.computed))
            budget -= chunk
    return work


def _blocks(running: Sequence[_State], work: Sequence[Work], spec: EngineSpec) -> int:
    added = {w.request_id: w.prefill_tokens + w.decode_tokens for w in work}
    need = 0
    for s in running:
        tokens = s.computed + added.get(s.req.request_id, 0)
        need += -(-tokens // spec.block_tokens)
    return need


def _advance(running: list[_State], work: Sequence[Work]) -> tuple[list[_State], int]:
    """The requests still running after the step, and the output tokens it sampled."""
    by_id = {w.request_id: w for w in work}
    out, sampled = [], 0
    for s in running:
        w = by_id.get(s.req.request_id)
        if w is not None:
            s.computed += w.prefill_tokens + w.decode_tokens
            if s.to_prefill == 0:  # its last prompt token, or a decode: one token sampled
                s.generated += 1
                sampled += 1
        if s.generated < s.req.output_tokens:
            out.append(s)
    return out, sampled

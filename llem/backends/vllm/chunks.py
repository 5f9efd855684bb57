"""Where each request's prompt was computed: vLLM's prefill chunks and preemption recomputes.

vLLM's engine core sends no output for a step that computed only part of a prompt (chunked
prefill, or the recompute of a preempted request), and it never tells llem's process how many
tokens it scheduled for each request: ``SchedulerOutput.num_scheduled_tokens`` stays in the
engine core. What does reach llem, per step, with ``enable_logging_iteration_details``
(``vllm.v1.metrics.stats.SchedulerIterationDetails``, from ``vllm.v1.utils.
compute_iteration_details``): the prompt tokens scheduled for requests that have no output yet
(``num_ctx_tokens``) and the tokens scheduled for the others (``num_generation_tokens``: one per
decoding request, plus a resumed request's recompute).

The placement rebuilds each request's chunks from those totals the way vLLM's scheduler hands
out its token budget: one token to each request that decodes in the step, the rest first come,
first served (prompts in arrival order, then the recomputes of preempted requests). The two
totals are taken together: under asynchronous scheduling a request's first decode is scheduled
before its first token is known, and vLLM counts it with the prompt tokens. The placement is
checked against what vLLM did report: each request's prefill must end in the step of its first
output, a recompute in the step the request speaks again, and every scheduled token must find
its request (less one per request that finished the step before: an asynchronous scheduler may
have scheduled it once more). Where a check fails, or the
totals are missing, a request's prefill is spread evenly over the steps from its arrival to its
first output instead, and ``Placement.unplaced`` says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from llem.vocabulary.workload import StepShare

#: How ``Placement.shares`` were built when every check held.
PLACED = (
    "prefill chunks and preemption recomputes placed in the steps that computed them, rebuilt "
    "first come first served from vLLM's per-step scheduled token totals (iteration details)"
)


@dataclass(frozen=True)
class SeenStep:
    """One engine step as llem's process saw it: the tokens each request got from it, and the
    scheduler's totals where vLLM reported them (None: not reported)."""

    made: tuple[tuple[int, int], ...]
    ctx_tokens: int | None = None  # prompt tokens scheduled for requests with no output yet
    gen_tokens: int | None = None  # tokens scheduled for requests that have output


@dataclass(frozen=True)
class Placement:
    """Each step's shares; ``unplaced`` is None when the chunks are vLLM's, else why the
    prefill was spread evenly from each request's arrival to its first output instead."""

    shares: list[tuple[StepShare, ...]]
    unplaced: str | None

    @property
    def note(self) -> str:
        if self.unplaced is None:
            return PLACED
        return (
            "prefill spread evenly over the steps from each request's arrival to its first "
            f"output (its chunks' own steps unknown: {self.unplaced})"
        )


class _Mismatch(Exception):
    pass


def place(
    records: Sequence[SeenStep],
    prefill: Mapping[int, int],
    prompt: Mapping[int, int],
    arrival_step: Mapping[int, int] | None = None,
) -> Placement:
    """The shares of every step. ``prefill``: each request's prompt tokens to compute (prompt
    less prefix-cache hits), in arrival order; ``prompt``: its whole prompt (what a recompute
    after preemption computes again, with the tokens it had produced); ``arrival_step``: the
    first step each request could have run in (default: the first)."""
    arrival = dict(arrival_step or {})
    if any(r.ctx_tokens is None or r.gen_tokens is None for r in records):
        reason = "vLLM reported no per-step scheduled token totals"
        return Placement(_spread(records, prefill, arrival), reason)
    try:
        return Placement(_rebuild(records, prefill, prompt), None)
    except _Mismatch as exc:
        return Placement(_spread(records, prefill, arrival), str(exc))


def _rebuild(
    records: Sequence[SeenStep], prefill: Mapping[int, int], prompt: Mapping[int, int]
) -> list[tuple[StepShare, ...]]:
    last = {rid: k for k, rec in enumerate(records) for rid, _ in rec.made}
    ended = Counter(last.values())  # requests whose last output came in each step
    left = {rid: n for rid, n in prefill.items() if n > 0}  # prefill still to compute
    spoke: dict[int, int] = {}  # tokens produced so far, per request that has spoken
    redo: dict[int, int] = {}  # recompute still to do, in preemption order
    out = []
    for k, rec in enumerate(records):
        made = dict(rec.made)
        for rid, n in spoke.items():  # a request gone quiet before its end was preempted
            if rid not in made and rid not in redo and last.get(rid, -1) > k:
                if rid not in prompt:
                    raise _Mismatch(f"request {rid} went quiet and its prompt is unknown")
                redo[rid] = prompt[rid] + n
        decoding = [rid for rid in made if rid in spoke and rid not in redo]
        pool = int(rec.ctx_tokens or 0) + int(rec.gen_tokens or 0) - len(decoding)
        chunk, pool = _fill(left, pool)
        _settle(left, made, "prefill", lambda rid: rid not in spoke)
        again, pool = _fill(redo, pool)
        _settle(redo, made, "recompute", lambda rid: True)
        # asynchronous scheduling may schedule one more token for a request that had just
        # finished (it schedules before the previous step's output is known)
        if not 0 <= pool <= ended.get(k - 1, 0):
            raise _Mismatch(f"step {k}'s scheduled tokens ({pool} left over) match no request")
        order = dict.fromkeys([*chunk, *again, *made])
        out.append(
            tuple(StepShare(r, chunk.get(r, 0) + again.get(r, 0), made.get(r, 0)) for r in order)
        )
        for rid, n in made.items():
            spoke[rid] = spoke.get(rid, 0) + n
    return out


def _settle(
    left: dict[int, int], made: Mapping[int, int], what: str, owes: Callable[[int], bool]
) -> None:
    """Drop the requests whose ``what`` ended this step; each must speak in this step, and
    a request that speaks while it ``owes`` tokens must have none left."""
    for rid in made:
        if rid in left and left[rid] != 0 and owes(rid):
            raise _Mismatch(f"request {rid} spoke before its {what} ended")
    for rid in [r for r, n in left.items() if n == 0]:
        if rid not in made:
            raise _Mismatch(f"request {rid}'s {what} ended without an output")
        del left[rid]


def _fill(left: dict[int, int], budget: int) -> tuple[dict[int, int], int]:
    """Hand ``budget`` tokens to the requests of ``left`` in order (first come first served):
    what each got, and what is left over."""
    got: dict[int, int] = {}
    for rid in left:
        if budget <= 0:
            break
        take = min(left[rid], budget)
        if take:
            got[rid] = take
            left[rid] -= take
            budget -= take
    return got, budget


def _spread(
    records: Sequence[SeenStep], prefill: Mapping[int, int], arrival: Mapping[int, int]
) -> list[tuple[StepShare, ...]]:
    """Each request's prefill spread evenly (whole tokens, remainder first) over the steps
    from its arrival step to the step of its first output; its outputs where they came."""
    first: dict[int, int] = {}
    for k, rec in enumerate(records):
        for rid, _ in rec.made:
            first.setdefault(rid, k)
    pre: list[dict[int, int]] = [{} for _ in records]
    for rid, n in prefill.items():
        if rid not in first or n <= 0:
            continue
        lo = min(arrival.get(rid, 0), first[rid])
        span = range(lo, first[rid] + 1)
        each, extra = divmod(n, len(span))
        for i, k in enumerate(span):
            if each + (i < extra):
                pre[k][rid] = each + (i < extra)
    out = []
    for k, rec in enumerate(records):
        made = dict(rec.made)
        order = dict.fromkeys([*pre[k], *made])
        out.append(tuple(StepShare(r, pre[k].get(r, 0), made.get(r, 0)) for r in order))
    return out

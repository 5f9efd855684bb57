"""How the fitted step model shares energy: a window cut into spans (the engine's steps and the
gaps between them), each step's requests' context, the time each part of a step keeps the GPU
busy, each part's share of its step and each span's share of its interval, and so each figure's
weight on each interval's energy (``llem.figures.attribution`` sums them into figures).

A step's energy is shared by its parts' fitted costs (``fractions``): ``a x prefill tokens + b x
decode tokens + k x context tokens read``, plus the static power ``P_static x d`` shared by the
time each part keeps the step busy (``step_pace``: the steps' durations fitted against their
tokens and context; the fixed part of a step's time is shared by tokens). A request's context in
a step is the tokens it computed in the steps before (``contexts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llem.figures.bins import Bins
from llem.figures.energy_fit import StepRow
from llem.vocabulary import EngineStep

Coefficients = tuple[float, float, float, float, float]  # a, b, p_static, p_between, k
# a step's fixed s, s per prefill token, per decode token, per context token
Pace = tuple[float, float, float, float]
TOKEN_PACE: Pace = (0.0, 1.0, 1.0, 0.0)  # static power by token share
# a step shared between its parts by time alone: no part's tokens cost it more than their time
TIME_SHARE: Coefficients = (0.0, 0.0, 1.0, 0.0, 0.0)
Key = tuple[str, int]  # ("prefill"|"decode"|"between"|"unattributed", 0) or ("req*", id)
Weights = dict[Key, dict[int, float]]  # figure -> interval -> weight of its energy


@dataclass(frozen=True)
class Span:
    """A span of the window: an engine step (``step``) or the gap before one (``step`` None);
    ``context``: each of the step's shares' context before it (tokens in its KV cache)."""

    start_s: float
    end_s: float
    step: EngineStep | None
    context: tuple[int, ...] = ()


def spans(steps: Sequence[EngineStep], t0: float, t1: float) -> list[Span]:
    """``[t0, t1]`` cut into the steps that end inside it and the gaps between them. A step
    without a start begins where the previous one ended (the first: at ``t0``); a start before
    the previous end or ``t0`` is moved to it. Each step's requests' contexts come from every step
    before it (``contexts``)."""
    out: list[Span] = []
    edge = t0
    ordered = sorted(steps, key=lambda s: s.end_s)
    for s, ctx in zip(ordered, contexts(ordered), strict=True):
        if not t0 < s.end_s <= t1:
            continue
        start = edge if s.start_s is None else min(max(s.start_s, edge), s.end_s)
        if start > edge:
            out.append(Span(edge, start, None))
        out.append(Span(start, s.end_s, s, ctx))
        edge = s.end_s
    if t1 > edge:
        out.append(Span(edge, t1, None))
    return out


def contexts(steps: Sequence[EngineStep]) -> list[tuple[int, ...]]:
    """Each step's shares' context: the tokens each request computed in the steps before (in the
    order given), starting again from 0 where a request that had decoded is prefilled again (a
    preemption's recompute)."""
    held: dict[int, int] = {}
    decoded: set[int] = set()
    out = []
    for s in steps:
        row = []
        for x in s.shares or ():
            if x.prefill_tokens and x.request_id in decoded:
                held[x.request_id] = 0
                decoded.discard(x.request_id)
            row.append(held.get(x.request_id, 0))
            held[x.request_id] = row[-1] + x.prefill_tokens + x.decode_tokens
            if x.decode_tokens:
                decoded.add(x.request_id)
        out.append(tuple(row))
    return out


def step_pace(cut: Sequence[Span]) -> Pace:
    """How a step's time divides between its parts: the steps' durations fitted by least
    squares against the tokens they computed and the context they read, ``d = t0 + t_token x
    tokens + t_context x context`` (each at least 0); a part's time is ``(t0 / tokens + t_token)
    x its tokens + t_context x its context``. Token share (``TOKEN_PACE``) where the steps cannot
    tell or a token takes no time."""
    import numpy as np

    rows = [_row(s) for s in cut if s.step is not None]
    x = np.array([[1.0, r.prefill_tokens, r.decode_tokens, r.context_tokens] for r in rows])
    if len(rows) < 5 or int(np.linalg.matrix_rank(x)) < 4:
        return TOKEN_PACE
    y = np.array([r.duration_s for r in rows])
    t0, tp, tq, tx = (max(float(v), 0.0) for v in np.linalg.lstsq(x, y, rcond=None)[0])
    return (t0, tp, tq, tx) if t0 + min(tp, tq) > 0 else TOKEN_PACE


def _interval_row(cut: Sequence[Span], lo: int, hi: int) -> StepRow:
    p = q = ctx = 0
    step_s = between_s = 0.0
    for span in cut[lo:hi]:
        d = span.end_s - span.start_s
        if span.step is None:
            between_s += d
            continue
        p += span.step.prefill_tokens or 0
        q += span.step.decode_tokens or 0
        ctx += sum(span.context)
        step_s += d
    return StepRow(p, q, step_s, between_s, ctx)


def interval_rows(cut: Sequence[Span], groups: Sequence[tuple[int, int]]) -> list[StepRow]:
    """Each interval's regressors (``groups``: span index ranges, end excluded)."""
    return [_interval_row(cut, lo, hi) for lo, hi in groups]


def _row(span: Span) -> StepRow:
    s = span.step
    assert s is not None
    return StepRow(
        s.prefill_tokens or 0,
        s.decode_tokens or 0,
        span.end_s - span.start_s,
        0.0,
        sum(span.context),
    )


def fractions(
    parts: Sequence[tuple[int, int, int]],
    row: StepRow,
    c: Sequence[float],
    idle: Sequence[bool] | None = None,
    pace: Pace = TOKEN_PACE,
) -> list[float]:
    """Each part's share of a step (``parts``: prefill tokens, decode tokens, context tokens
    read): its tokens' and its context's fitted cost plus static power by its share of the step's
    time (``pace``: the step's fixed time shared by tokens, then its tokens' and its context's
    time; ``step_pace``); where the step computed no token, equal shares of the parts flagged in
    ``idle`` (every part where None)."""
    a, b, p_static, k = c[0], c[1], c[2], c[4]
    n = sum(p + q for p, q, _ in parts)
    t0, per_prefill, per_decode, per_context = pace
    fixed = t0 / n if n else 0.0
    times = [
        (fixed + per_prefill) * p + (fixed + per_decode) * q + per_context * x for p, q, x in parts
    ]
    busy = sum(times)
    static = p_static * row.duration_s / busy if busy else 0.0
    costs = [a * p + b * q + k * x + static * t for (p, q, x), t in zip(parts, times, strict=True)]
    total = sum(costs)
    if total > 0:
        return [x / total for x in costs]
    tokens = [p + q for p, q, _ in parts]
    if n > 0:
        return [t / n for t in tokens]
    flags = list(idle) if idle is not None and any(idle) else [True] * len(parts)
    return [1.0 / sum(flags) if flag else 0.0 for flag in flags]


def shares_in(cut: Sequence[Span], lo: int, hi: int, c: Coefficients) -> list[float]:
    """Each span's share of its interval's energy under costs ``c`` (by duration where the
    costs give the interval nothing)."""
    if hi - lo == 1:
        return [1.0]
    cost = []
    for span in cut[lo:hi]:
        d = span.end_s - span.start_s
        if span.step is None:
            cost.append(c[3] * d)
        else:
            r = _row(span)
            cost.append(
                c[0] * r.prefill_tokens
                + c[1] * r.decode_tokens
                + c[2] * d
                + c[4] * r.context_tokens
            )
    total = sum(cost)
    if total <= 0:
        cost = [s.end_s - s.start_s for s in cut[lo:hi]]
        total = sum(cost)
    return [x / total if total > 0 else 1.0 / (hi - lo) for x in cost]


def weights_of(
    cut: Sequence[Span],
    b: Bins,
    c: Coefficients,
    pace: Pace = TOKEN_PACE,
    within: Coefficients | None = None,
) -> Weights:
    """Each figure's weight on each interval's energy under costs ``c`` (``pace``:
    ``fractions``); ``within``: other costs to share each step between its parts by (``TIME_SHARE``:
    by time alone), the spans of an interval still shared by ``c``."""
    inner = c if within is None else within
    out: Weights = {}

    def add(key: Key, k: int, x: float) -> None:
        if x:
            w = out.setdefault(key, {})
            w[k] = w.get(k, 0.0) + x

    for k, (lo, hi) in enumerate(b.groups):
        for span, g in zip(cut[lo:hi], shares_in(cut, lo, hi, c), strict=True):
            if span.step is None:
                add(("between", 0), k, g)
                add(("unattributed", 0), k, g)
                continue
            row = _row(span)
            shares = span.step.shares or ()
            read = [
                (x if s.prefill_tokens else 0, 0 if s.prefill_tokens else x)
                for s, x in zip(shares, span.context, strict=False)
            ]
            pre, dec = fractions(
                [
                    (row.prefill_tokens, 0, sum(r[0] for r in read)),
                    (0, row.decode_tokens, sum(r[1] for r in read)),
                ],
                row,
                inner,
                (False, True),
                pace,
            )
            add(("prefill", 0), k, g * pre)
            add(("decode", 0), k, g * dec)
            if not shares:
                add(("unattributed", 0), k, g)
                continue
            parts = [
                p
                for s, (rp, rd) in zip(shares, read or [(0, 0)] * len(shares), strict=True)
                for p in ((s.prefill_tokens, 0, rp), (0, s.decode_tokens, rd))
            ]
            decode = [j % 2 == 1 for j in range(len(parts))]
            f = fractions(parts, row, inner, decode, pace)
            for j, share in enumerate(shares):
                rid = share.request_id
                add(("req", rid), k, g * (f[2 * j] + f[2 * j + 1]))
                add(("req_prefill", rid), k, g * f[2 * j])
                add(("req_decode", rid), k, g * f[2 * j + 1])
    return out

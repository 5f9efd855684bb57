"""How the fitted step model shares energy: a window cut into spans (the engine's steps and the
gaps between them), each step's requests' context, the time each part of a step keeps the GPU
busy and each part's share of its step (``llem.figures.share_weights`` shares each interval
between its spans and sums the parts' shares into each figure's weight on each interval).

A step's energy is shared by its parts' fitted costs (``part_fractions``): ``a x prefill
tokens + b x decode tokens + k x context tokens read``, plus the static power ``P_static x d``
shared by the time each part keeps the step busy (``step_pace``: the steps' durations fitted
against their tokens and context; the fixed part of a step's time is shared by tokens). A
request's context in a step is the tokens it computed in the steps before (``contexts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llem.figures.energy_fit import StepRow
from llem.vocabulary.workload import EngineStep

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

Coefficients = tuple[float, float, float, float, float]  # a, b, p_static, p_between, k
# a step's fixed s, s per prefill token, per decode token, per context token
Pace = tuple[float, float, float, float]
TOKEN_PACE: Pace = (0.0, 1.0, 1.0, 0.0)  # static power by token share
# a step shared between its parts by time alone: no part's tokens cost it more than their time
TIME_SHARE: Coefficients = (0.0, 0.0, 1.0, 0.0, 0.0)
Key = tuple[str, int]  # ("prefill"|"decode"|"between"|"unattributed", 0) or ("req*", id)
IntervalWeights = dict[Key, dict[int, float]]  # figure -> interval -> weight of its energy


@dataclass(frozen=True)
class StepSpan:
    """A span of the window: an engine step (``step``) or the gap before one (``step`` None);
    ``context``: each of the step's shares' context before it (tokens in its KV cache)."""

    start_s: float
    end_s: float
    step: EngineStep | None
    context: tuple[int, ...] = ()


def spans(steps: Sequence[EngineStep], t0: float, t1: float) -> list[StepSpan]:
    """``[t0, t1]`` cut into the steps that end inside it and the gaps between them. A step
    without a start begins where the previous one ended (the first: at ``t0``); a start before
    the previous end or ``t0`` is moved to it. Each step's requests' contexts come from every step
    before it (``contexts``)."""
    out: list[StepSpan] = []
    edge = t0
    ordered = sorted(steps, key=lambda s: s.end_s)
    for s, ctx in zip(ordered, contexts(ordered), strict=True):
        if not t0 < s.end_s <= t1:
            continue
        start = edge if s.start_s is None else min(max(s.start_s, edge), s.end_s)
        if start > edge:
            out.append(StepSpan(edge, start, None))
        out.append(StepSpan(start, s.end_s, s, ctx))
        edge = s.end_s
    if t1 > edge:
        out.append(StepSpan(edge, t1, None))
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


def step_pace(cut: Sequence[StepSpan]) -> Pace:
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
    fitted = np.linalg.lstsq(x, y, rcond=None)[0]
    # a term that adds less than a billionth of the longest step is rounding, not time (a pace
    # planted at 0 comes out at +-1e-18 s, its sign the BLAS build's)
    tiny = 1e-9 * float(np.max(y))
    top = np.max(x, axis=0)
    t0, tp, tq, tx = (float(v) if v * m > tiny else 0.0 for v, m in zip(fitted, top, strict=True))
    return (t0, tp, tq, tx) if t0 + min(tp, tq) > 0 else TOKEN_PACE


def _interval_row(cut: Sequence[StepSpan], lo: int, hi: int) -> StepRow:
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


def interval_rows(cut: Sequence[StepSpan], groups: Sequence[tuple[int, int]]) -> list[StepRow]:
    """Each interval's regressors (``groups``: span index ranges, end excluded)."""
    return [_interval_row(cut, lo, hi) for lo, hi in groups]


def _row(span: StepSpan) -> StepRow:
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
    read; ``part_fractions`` for one step)."""
    import numpy as np

    flags = [False] * len(parts) if idle is None else list(idle)
    got = part_fractions(
        np.array(parts, dtype=float).reshape(-1, 3),
        np.zeros(len(parts), dtype=int),
        np.array([row.duration_s]),
        np.array(flags, dtype=bool),
        c,
        pace,
    )
    return [float(x) for x in got]


def part_fractions(
    parts: NDArray[np.float64],
    step: NDArray[np.int_],
    duration_s: NDArray[np.float64],
    idle: NDArray[np.bool_],
    c: Sequence[float],
    pace: Pace,
) -> NDArray[np.float64]:
    """Each part's share of its step (arrays: ``parts`` rows of prefill tokens, decode tokens,
    context tokens read; ``step`` each part's step, in order; ``duration_s`` each step's): its
    tokens' and its context's fitted cost plus the step's static power by its share of the step's
    time (``pace``: the step's fixed time shared by tokens, then its tokens' and its context's
    time; ``step_pace``); where a step's costs give it nothing, its parts' token shares; where it
    computed no token, equal shares of its parts flagged in ``idle`` (every part where none is)."""
    import numpy as np

    a, b, p_static, k = c[0], c[1], c[2], c[4]
    t0, per_prefill, per_decode, per_context = pace
    p, q, x = parts[:, 0], parts[:, 1], parts[:, 2]
    steps = len(duration_s)
    n = np.bincount(step, p + q, minlength=steps)
    fixed = np.where(n > 0, t0 / np.where(n > 0, n, 1.0), 0.0)[step]
    times = (fixed + per_prefill) * p + (fixed + per_decode) * q + per_context * x
    busy = np.bincount(step, times, minlength=steps)
    static = np.where(busy != 0, p_static * duration_s / np.where(busy != 0, busy, 1.0), 0.0)
    costs = a * p + b * q + k * x + static[step] * times
    total = np.bincount(step, costs, minlength=steps)[step]
    tokens = n[step]
    flagged = (np.bincount(step, idle, minlength=steps) > 0)[step]
    flags = np.where(flagged, idle, True)
    count = np.bincount(step, flags, minlength=steps)[step]
    return np.where(
        total > 0,
        costs / np.where(total > 0, total, 1.0),
        np.where(
            tokens > 0,
            (p + q) / np.where(tokens > 0, tokens, 1.0),
            np.where(flags, 1.0 / np.where(count > 0, count, 1.0), 0.0),
        ),
    )

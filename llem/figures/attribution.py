"""Where a window's energy goes: prefill, decode, between steps, and each request's share.

Pure computations over a window cut into spans (``spans``: the engine steps and the gaps between
them, which partition the window) whose energies were measured (``llem.measure.span_energy``),
grouped into intervals the power timeline can resolve (``llem.figures.bins``: each lasts at least
twice the timeline's resolution; every span its own interval where the timeline resolves them):

* the fit (``llem.figures.energy_fit``) runs over the intervals: each one's measured energy
  against its prefill tokens, decode tokens, seconds in steps and seconds between steps;
* an interval's measured energy is shared between its spans by the fitted model (a step
  ``a p + b q + P_static d``, a gap ``P_between d``; ``P_static`` where ``P_between`` is not
  fitted), so a step's energy is never read off a timeline too coarse to show it;
* phases: a step's energy goes to prefill and decode by the fitted model: its prefill part costs
  ``a x prefill tokens + P_static x d x prefill share``, its decode part ``b x decode tokens +
  P_static x d x decode share``, the static power split by each phase's share of the step's
  tokens; a step that computed no tokens counts as decode; the gaps are ``between_steps_j``.
  Prefill + decode + between = the window's energy, exactly.
* requests: the same split per request, by the tokens each request computed in the step
  (``EngineStep.shares``): request r's cost is ``a p_r + b q_r + P_static x d x (p_r + q_r) / N``.
  The gaps, and steps whose requests are unknown, are ``unattributed_j``: requests + unattributed
  = the window's energy, exactly.

A coefficient fitted but not published (within two standard errors of 0: ``energy_fit``) is
still used by the split, anywhere within its timing bound. Where the fit cannot identify its
three coefficients: if every span is its own interval, steps
are split by token share (a prefill token costs what a decode token does, static power by
tokens; ``split_method`` says so) and the split's bound covers any costs ``a, b, P_static >= 0``
(the figures at the extremes they reach at one cost each); if intervals hold several spans,
nothing says how to share them, so the phase split and the requests are null with the reason.
Fitted coefficients below 0 are taken as 0 for the split.

Bounds (worst case, J). Every figure is a weighted sum of the intervals' energies,
``F = sum_i w_i E_i``: its timing error is ``llem.figures.bins.linear_bound(w)``, its scale error
``scale_relative x F``, and the coefficients' own bounds move the weights: ``F`` is recomputed at
each corner of the box the coefficients' bounds span and the furthest it moves is added (the
weights are ratios of linear functions of the coefficients; their extremes are taken at the
corners). No part can be below 0 or above the window's energy, so no bound is wider than
``max(F, total x (1 + scale_relative) - F)``. What the linear model cannot express (a GPU whose
power is not linear in the tokens) is outside the bounds; the fit's R^2 and standard errors show
it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from llem.backends.types import EngineStep
from llem.figures.bins import Bins, linear_bound, per_span, sparse_bound
from llem.figures.energy_fit import Coefficient, Fit, StepRow, fit_steps

FIT_SPLIT = "linear_fit"
TOKEN_SPLIT = "token_share"
METHOD = (
    "linear step model E = a x prefill tokens + b x decode tokens + P_static x step seconds "
    "+ P_between x seconds between steps, least squares over intervals of the window no "
    "shorter than twice the power timeline's resolution (each engine step where the timeline "
    "resolves it); an interval's energy shared by its spans' fitted costs, a step's by each "
    "part's fitted cost, static power by token share"
)

Coefficients = tuple[float, float, float, float]  # a, b, p_static, p_between
# Where the fit cannot be used, any costs >= 0 may hold: a fraction's extremes over them lie at
# these corners (one cost each), so the token-share split's bound covers every such split.
_ANY_COSTS: tuple[Coefficients, ...] = (
    (1.0, 0.0, 0.0, 0.0),
    (0.0, 1.0, 0.0, 0.0),
    (0.0, 0.0, 1.0, 0.0),
)
Key = tuple[str, int]  # ("prefill"|"decode"|"between"|"unattributed", 0) or ("req*", id)
_BOUNDED = ("prefill", "decode", "between", "unattributed", "req")  # figures with a bound
Weights = dict[Key, dict[int, float]]  # figure -> interval -> weight of its energy


@dataclass(frozen=True)
class Span:
    """A span of the window: an engine step (``step``) or the gap before one (``step`` None)."""

    start_s: float
    end_s: float
    step: EngineStep | None


@dataclass(frozen=True)
class Part:
    """Energy with its worst-case bound (J)."""

    energy_j: float
    bound_j: float


@dataclass(frozen=True)
class RequestEnergy:
    request_id: int
    energy_j: float
    bound_j: float
    prefill_j: float
    decode_j: float


@dataclass(frozen=True)
class Attribution:
    total_j: float
    prefill: Part | None
    decode: Part | None
    between: Part | None
    fit: Fit
    split_method: str | None  # linear_fit | token_share; None: no split
    split_null_reason: str | None  # why the fit could not be used for the split
    requests: dict[int, RequestEnergy] | None
    requests_null_reason: str | None
    unattributed: Part | None
    prefill_tokens: int
    decode_tokens: int
    bins: Bins
    span_energy_j: tuple[float, ...] | None  # each span's share of its interval's energy


def spans(steps: Sequence[EngineStep], t0: float, t1: float) -> list[Span]:
    """``[t0, t1]`` cut into the steps that end inside it and the gaps between them. A step
    without a start begins where the previous one ended (the first: at ``t0``); a start before
    the previous end or ``t0`` is moved to it."""
    out: list[Span] = []
    edge = t0
    for s in sorted((s for s in steps if t0 < s.end_s <= t1), key=lambda s: s.end_s):
        start = edge if s.start_s is None else min(max(s.start_s, edge), s.end_s)
        if start > edge:
            out.append(Span(edge, start, None))
        out.append(Span(start, s.end_s, s))
        edge = s.end_s
    if t1 > edge:
        out.append(Span(edge, t1, None))
    return out


def attribute(
    cut: Sequence[Span],
    energy_j: Sequence[float],
    timing_bound_j: Sequence[float],
    scale_relative: float = 0.0,
    bins: Bins | None = None,
) -> Attribution:
    """The fit, the phase split and each request's energy (module docstring); ``bins``: the
    intervals (every span its own, with its own timing bound, where None)."""
    b = bins or per_span(energy_j, timing_bound_j)
    rows = [_interval_row(cut, lo, hi) for lo, hi in b.groups]
    fit = fit_steps(
        rows, b.energy_j, [0.0] * len(rows), scale_relative, lambda w: linear_bound(w, b)
    )
    steps = [s.step for s in cut if s.step is not None]
    tokens = (
        sum(s.prefill_tokens or 0 for s in steps),
        sum(s.decode_tokens or 0 for s in steps),
    )
    total = sum(b.energy_j)
    coarse = any(hi - lo > 1 for lo, hi in b.groups)
    coeffs, box, why = _split_model(fit)
    if why is not None and coarse:
        reason = (
            f"{why}; the power timeline (resolution {b.resolution_s * 1000:.0f} ms) is too "
            f"coarse to read each step's energy, and the fit over {len(rows)} intervals of "
            f"{b.min_s:.2g} s or more cannot share them"
        )
        return Attribution(
            total, None, None, None, fit, None, reason, None, reason, None, *tokens, b, None
        )
    weights = _weights(cut, b, coeffs)
    moved = [_weights(cut, b, corner) for corner in box]
    keys = set(weights).union(*moved)  # a figure that is 0 at the point may not be at a corner
    figures = {
        k: _figure(k, weights, moved, b, scale_relative, total) for k in keys if k[0] in _BOUNDED
    }
    requests, req_why = _requests(figures, weights, b)
    return Attribution(
        total_j=total,
        prefill=figures.get(("prefill", 0), Part(0.0, 0.0)),
        decode=figures.get(("decode", 0), Part(0.0, 0.0)),
        between=figures.get(("between", 0), Part(0.0, 0.0)),
        fit=fit,
        split_method=FIT_SPLIT if why is None else TOKEN_SPLIT,
        split_null_reason=why,
        requests=requests,
        requests_null_reason=req_why,
        unattributed=figures.get(("unattributed", 0), Part(0.0, 0.0)),
        prefill_tokens=tokens[0],
        decode_tokens=tokens[1],
        bins=b,
        span_energy_j=_span_energies(cut, b, coeffs),
    )


def _figure(
    key: Key,
    weights: Weights,
    moved: Sequence[Weights],
    b: Bins,
    scale_relative: float,
    total: float,
) -> Part:
    """A figure ``sum_i w_i E_i`` with its bound (module docstring)."""
    w = weights.get(key, {})
    value = _value(w, b)
    timing = sparse_bound(w, b)
    shift = max((abs(_value(m.get(key, {}), b) - value) for m in moved), default=0.0)
    bound = timing + scale_relative * abs(value) + shift
    cap = total * (1.0 + scale_relative)
    return Part(value, min(bound, max(value, cap - value)))


def _value(w: dict[int, float], b: Bins) -> float:
    return sum(x * b.energy_j[i] for i, x in w.items())


def _interval_row(cut: Sequence[Span], lo: int, hi: int) -> StepRow:
    p = q = 0
    step_s = between_s = 0.0
    for span in cut[lo:hi]:
        d = span.end_s - span.start_s
        if span.step is None:
            between_s += d
            continue
        p += span.step.prefill_tokens or 0
        q += span.step.decode_tokens or 0
        step_s += d
    return StepRow(p, q, step_s, between_s)


def _row(span: Span) -> StepRow:
    s = span.step
    assert s is not None
    return StepRow(s.prefill_tokens or 0, s.decode_tokens or 0, span.end_s - span.start_s)


def _split_model(fit: Fit) -> tuple[Coefficients, list[Coefficients], str | None]:
    """The coefficients a split uses, the corners of their bound box, and why the fit was not
    used (None when it was). ``P_between`` not fitted: ``P_static``, anywhere from 0 to its
    upper bound."""
    unusable = [c for c in (fit.a, fit.b, fit.p_static) if not _usable(c)]
    if unusable:
        missing = [c.null_reason or _BELOW_ZERO for c in unusable]
        return (1.0, 1.0, 0.0, 0.0), list(_ANY_COSTS), "; ".join(missing)
    ranges, values = [], []
    for c in (fit.a, fit.b, fit.p_static):
        v, d = float(c.usable or 0.0), float(c.timing_bound or 0.0)
        values.append(max(v, 0.0))
        ranges.append((max(v - d, 0.0), max(v + d, 0.0)))
    gap = fit.p_between
    if not _usable(gap):
        values.append(values[2])
        ranges.append((0.0, ranges[2][1]))
    else:
        v, d = float(gap.usable or 0.0), float(gap.timing_bound or 0.0)
        values.append(max(v, 0.0))
        ranges.append((max(v - d, 0.0), max(v + d, 0.0)))
    corners = [(a, b, p, g) for a, b, p, g in itertools.product(*ranges)]
    return (values[0], values[1], values[2], values[3]), corners, None


_BELOW_ZERO = "not resolved: the fitted cost and its whole bound are below 0, which no cost is"


def _usable(c: Coefficient) -> bool:
    """A split may use a fitted coefficient whose bound reaches 0 or above: one whose whole bound
    is below 0 says the model does not hold there (a cost is never negative)."""
    v = c.usable
    return v is not None and v + float(c.timing_bound or 0.0) > 0


def fractions(
    parts: Sequence[tuple[int, int]],
    row: StepRow,
    c: Sequence[float],
    idle: Sequence[bool] | None = None,
) -> list[float]:
    """Each part's share of a step: its tokens' fitted cost plus static power by token share;
    where the step computed no token, equal shares of the parts flagged in ``idle`` (every part
    where None)."""
    a, b, p_static = c[0], c[1], c[2]
    n = sum(p + q for p, q in parts)
    costs = [
        a * p + b * q + (p_static * row.duration_s * (p + q) / n if n else 0.0) for p, q in parts
    ]
    total = sum(costs)
    if total > 0:
        return [x / total for x in costs]
    tokens = [p + q for p, q in parts]
    if n > 0:
        return [t / n for t in tokens]
    flags = list(idle) if idle is not None and any(idle) else [True] * len(parts)
    return [1.0 / sum(flags) if flag else 0.0 for flag in flags]


def _shares_in(cut: Sequence[Span], lo: int, hi: int, c: Coefficients) -> list[float]:
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
            cost.append(c[0] * r.prefill_tokens + c[1] * r.decode_tokens + c[2] * d)
    total = sum(cost)
    if total <= 0:
        cost = [s.end_s - s.start_s for s in cut[lo:hi]]
        total = sum(cost)
    return [x / total if total > 0 else 1.0 / (hi - lo) for x in cost]


def _weights(cut: Sequence[Span], b: Bins, c: Coefficients) -> Weights:
    """Each figure's weight on each interval's energy under costs ``c``."""
    out: Weights = {}

    def add(key: Key, k: int, x: float) -> None:
        if x:
            w = out.setdefault(key, {})
            w[k] = w.get(k, 0.0) + x

    for k, (lo, hi) in enumerate(b.groups):
        for span, g in zip(cut[lo:hi], _shares_in(cut, lo, hi, c), strict=True):
            if span.step is None:
                add(("between", 0), k, g)
                add(("unattributed", 0), k, g)
                continue
            row = _row(span)
            pre, dec = fractions(
                [(row.prefill_tokens, 0), (0, row.decode_tokens)], row, c, (False, True)
            )
            add(("prefill", 0), k, g * pre)
            add(("decode", 0), k, g * dec)
            shares = span.step.shares
            if not shares:
                add(("unattributed", 0), k, g)
                continue
            parts = [p for s in shares for p in ((s.prefill_tokens, 0), (0, s.decode_tokens))]
            decode = [j % 2 == 1 for j in range(len(parts))]
            f = fractions(parts, row, c, decode)
            for j, share in enumerate(shares):
                rid = share.request_id
                add(("req", rid), k, g * (f[2 * j] + f[2 * j + 1]))
                add(("req_prefill", rid), k, g * f[2 * j])
                add(("req_decode", rid), k, g * f[2 * j + 1])
    return out


def _requests(
    figures: dict[Key, Part], weights: Weights, b: Bins
) -> tuple[dict[int, RequestEnergy] | None, str | None]:
    ids = sorted(rid for kind, rid in figures if kind == "req")
    if not ids:
        return None, "no engine step says which requests ran in it"
    out = {}
    for rid in ids:
        r = figures[("req", rid)]
        pre = _value(weights.get(("req_prefill", rid), {}), b)
        dec = _value(weights.get(("req_decode", rid), {}), b)
        out[rid] = RequestEnergy(rid, r.energy_j, r.bound_j, pre, dec)
    return out, None


def _span_energies(cut: Sequence[Span], b: Bins, c: Coefficients) -> tuple[float, ...]:
    out: list[float] = []
    for k, (lo, hi) in enumerate(b.groups):
        out += [g * b.energy_j[k] for g in _shares_in(cut, lo, hi, c)]
    return tuple(out)

"""Where a window's energy goes: prefill, decode, between steps, and each request's share.

Pure computations over a window cut into spans (``spans``: the engine steps and the gaps between
them, which partition the window) whose energies and bounds were measured
(``llem.measure.span_energy``):

* phases: a step's energy goes to prefill and decode by the fitted model (``llem.figures.
  energy_fit``): its prefill part costs ``a x prefill tokens + P_static x d x prefill share``, its
  decode part ``b x decode tokens + P_static x d x decode share``, the static power split by each
  phase's share of the step's tokens; a step that computed no tokens counts as decode; the gaps
  are ``between_steps_j``. Prefill + decode + between = the window's energy, exactly.
* requests: the same split per request, by the tokens each request computed in the step
  (``EngineStep.shares``): request r's cost is ``a p_r + b q_r + P_static x d x (p_r + q_r) / N``.
  The gaps, and steps whose requests are unknown, are ``unattributed_j``: requests + unattributed
  = the window's energy, exactly.

Where the fit cannot identify its three coefficients, steps are split by token share instead (a
prefill token costs what a decode token does, static power by tokens): ``split_method`` says so,
and the split's bound then covers any costs ``a, b, P_static >= 0`` (its fractions move to the
extremes they reach at one cost each), since nothing says which hold.
Fitted coefficients below 0 are taken as 0 for the split.

Bounds (worst case, J): a part's energy ``f x E`` is off by at most ``f x bound(E)`` (the step's
measured energy: its timing bound plus ``scale_relative x E``) plus ``|df| x E``, ``df`` the
furthest its fraction ``f`` moves when the fitted coefficients move within their timing bounds
(a common scale error moves no fraction; the fraction is a ratio of linear functions of the
coefficients, so its extremes lie at the corners of their box). Sums add their parts' bounds. No
part can be below 0 or above the window's energy, so no bound is wider than
``max(E, total x (1 + scale_relative) - E)``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from llem.backends.types import EngineStep
from llem.figures.energy_fit import Fit, StepRow, fit_steps

FIT_SPLIT = "linear_fit"
TOKEN_SPLIT = "token_share"
METHOD = (
    "linear step model E = a x prefill tokens + b x decode tokens + P_static x duration, "
    "least squares over the window's steps; a step's energy split by each part's fitted cost, "
    "static power by token share"
)

Coefficients = tuple[float, float, float]  # a, b, p_static
# Where the fit cannot be used, any costs >= 0 may hold: a fraction's extremes over them lie at
# these corners (one cost each), so the token-share split's bound covers every such split.
_ANY_COSTS: tuple[Coefficients, ...] = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


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
    prefill: Part
    decode: Part
    between: Part
    fit: Fit
    split_method: str  # linear_fit | token_share
    split_null_reason: str | None  # why the fit could not be used for the split
    requests: dict[int, RequestEnergy] | None
    requests_null_reason: str | None
    unattributed: Part
    prefill_tokens: int
    decode_tokens: int


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
) -> Attribution:
    """The phase split, the fit and each request's energy (module docstring)."""
    idx = [i for i, s in enumerate(cut) if s.step is not None]
    rows = [_row(cut[i]) for i in idx]
    timing = [timing_bound_j[i] for i in idx]
    fit = fit_steps(rows, [energy_j[i] for i in idx], timing, scale_relative)
    bound_j = [t + scale_relative * abs(e) for t, e in zip(timing_bound_j, energy_j, strict=True)]
    coeffs, box, why = _split_model(fit)
    pre, dec, between = [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]
    for i, span in enumerate(cut):
        if span.step is None:
            _add(between, energy_j[i], bound_j[i])
            continue
        row = _row(span)
        parts = [(row.prefill_tokens, 0), (0, row.decode_tokens)]
        got = _split(parts, row, energy_j[i], bound_j[i], coeffs, box)
        _add(pre, got[0].energy_j, got[0].bound_j)
        _add(dec, got[1].energy_j, got[1].bound_j)
    requests, req_why, unattributed = _requests(cut, energy_j, bound_j, coeffs, box)
    total = sum(energy_j)
    cap = total * (1.0 + scale_relative)
    if requests is not None:
        requests = {
            rid: dataclasses.replace(r, bound_j=_cap(r.energy_j, r.bound_j, cap))
            for rid, r in requests.items()
        }
    return Attribution(
        total_j=total,
        prefill=Part(pre[0], _cap(pre[0], pre[1], cap)),
        decode=Part(dec[0], _cap(dec[0], dec[1], cap)),
        between=Part(between[0], _cap(between[0], between[1], cap)),
        fit=fit,
        split_method=FIT_SPLIT if why is None else TOKEN_SPLIT,
        split_null_reason=why,
        requests=requests,
        requests_null_reason=req_why,
        unattributed=Part(
            unattributed.energy_j, _cap(unattributed.energy_j, unattributed.bound_j, cap)
        ),
        prefill_tokens=sum(r.prefill_tokens for r in rows),
        decode_tokens=sum(r.decode_tokens for r in rows),
    )


def _cap(energy: float, bound: float, cap: float) -> float:
    """A part lies in [0, the window's energy]: its bound need not be wider than that."""
    return min(bound, max(energy, cap - energy))


def _row(span: Span) -> StepRow:
    s = span.step
    assert s is not None
    return StepRow(s.prefill_tokens or 0, s.decode_tokens or 0, span.end_s - span.start_s)


def _add(acc: list[float], energy: float, bound: float) -> None:
    acc[0] += energy
    acc[1] += bound


def _split_model(fit: Fit) -> tuple[Coefficients, list[Coefficients], str | None]:
    """The coefficients a split uses, the corners of their bound box, and why the fit was not
    used (None when it was)."""
    if not fit.identified:
        missing = [c.null_reason for c in (fit.a, fit.b, fit.p_static) if c.null_reason]
        return (1.0, 1.0, 0.0), list(_ANY_COSTS), "; ".join(m for m in missing if m)
    values = [max(float(c.value or 0.0), 0.0) for c in (fit.a, fit.b, fit.p_static)]
    ranges = []
    for c in (fit.a, fit.b, fit.p_static):
        v, d = float(c.value or 0.0), float(c.timing_bound or 0.0)
        ranges.append((max(v - d, 0.0), max(v + d, 0.0)))
    corners = [(a, b, p) for a, b, p in itertools.product(*ranges)]
    return (values[0], values[1], values[2]), corners, None


def fractions(
    parts: Sequence[tuple[int, int]],
    row: StepRow,
    c: Coefficients,
    idle: Sequence[bool] | None = None,
) -> list[float]:
    """Each part's share of a step: its tokens' fitted cost plus static power by token share;
    where the step computed no token, equal shares of the parts flagged in ``idle`` (every part
    where None)."""
    a, b, p_static = c
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


def _split(
    parts: Sequence[tuple[int, int]],
    row: StepRow,
    energy: float,
    bound: float,
    coeffs: Coefficients,
    box: Sequence[Coefficients],
) -> list[Part]:
    """A step's energy over ``parts`` (prefill tokens, decode tokens), each with its bound."""
    decode = [k % 2 == 1 for k in range(len(parts))]  # parts come as (prefill, decode) pairs
    f = fractions(parts, row, coeffs, decode)
    moved = [0.0] * len(parts)
    if sum(1 for x in f if 0.0 < x < 1.0) > 1:  # one part takes all: no fit error moves it
        for corner in box:
            g = fractions(parts, row, corner, decode)
            moved = [max(m, abs(gk - fk)) for m, gk, fk in zip(moved, g, f, strict=True)]
    return [
        Part(fk * energy, fk * bound + mk * abs(energy)) for fk, mk in zip(f, moved, strict=True)
    ]


def _requests(
    cut: Sequence[Span],
    energy_j: Sequence[float],
    bound_j: Sequence[float],
    coeffs: Coefficients,
    box: Sequence[Coefficients],
) -> tuple[dict[int, RequestEnergy] | None, str | None, Part]:
    """Each request's energy (None with the reason when no step says which requests ran) and
    what no request takes."""
    acc: dict[int, list[float]] = {}  # id -> [energy, bound, prefill, decode]
    left = [0.0, 0.0]
    for i, span in enumerate(cut):
        step = span.step
        if step is None or not step.shares:
            _add(left, energy_j[i], bound_j[i])
            continue
        parts = [p for s in step.shares for p in ((s.prefill_tokens, 0), (0, s.decode_tokens))]
        got = _split(parts, _row(span), energy_j[i], bound_j[i], coeffs, box)
        for k, share in enumerate(step.shares):
            pre, dec = got[2 * k], got[2 * k + 1]
            a = acc.setdefault(share.request_id, [0.0, 0.0, 0.0, 0.0])
            a[0] += pre.energy_j + dec.energy_j
            a[1] += pre.bound_j + dec.bound_j
            a[2] += pre.energy_j
            a[3] += dec.energy_j
    if not acc:
        why = "no engine step says which requests ran in it"
        return None, why, Part(*left)
    out = {rid: RequestEnergy(rid, a[0], a[1], a[2], a[3]) for rid, a in sorted(acc.items())}
    return out, None, Part(*left)

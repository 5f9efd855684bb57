"""Where a window's energy goes: prefill, decode, between steps, and each request's share.

Pure computations over a window cut into spans (``spans``: the engine steps and the gaps between
them, which partition the window) whose energies were measured (``llem.measure.span_energy``),
grouped into intervals the power timeline can resolve (``llem.figures.bins``: each lasts at least
four times the timeline's resolution; every span its own interval where the timeline resolves
them):

* the fit (``llem.figures.energy_fit``) runs over the intervals: each one's measured energy
  against its prefill tokens, decode tokens, seconds in steps, seconds between steps and the
  context its steps read (each request's tokens in its KV cache before the step);
* an interval's measured energy is shared between its spans by the fitted model (a step
  ``a p + b q + k x + P_static d``, a gap ``P_between d``; ``P_static`` where ``P_between`` is
  not fitted), so a step's energy is never read off a timeline too coarse to show it;
* phases: a step's energy goes to prefill and decode half by the fitted model (its prefill part
  costs ``a x prefill tokens + k x their context + P_static x d x prefill's share of the step's
  time``, its decode part likewise) and half by each part's share of the step's time alone
  (``BY_TIME``; ``llem.figures.step_shares``: the step's time divided by the steps' durations
  fitted against tokens and context): how a step divides is a convention its energy cannot test,
  and the middle of the two is the figure nearest to either; a step that computed no tokens
  counts as decode; the gaps are ``between_steps_j``. Prefill + decode + between = the window's
  energy, exactly.
* requests: the same split per request, by the tokens each request computed in the step and its
  context (``EngineStep.shares``). The gaps, and steps whose requests are unknown, are
  ``unattributed_j``: requests + unattributed = the window's energy, exactly.
* each figure's 95 % interval (``llem.figures.interval``): the coefficients' spread and the
  residuals, with how far the figure is from either convention (half their gap).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from llem.figures.bins import Bins, linear_bound, per_span, sparse_bound
from llem.figures.energy_fit import Coefficient, Fit, StepRow, fit_steps
from llem.figures.interval import figure_intervals
from llem.figures.share_weights import Sharing
from llem.figures.step_shares import (
    Coefficients,
    IntervalWeights,
    Key,
    StepSpan,
    interval_rows,
    spans,
    step_pace,
)

__all__ = [  # StepSpan and spans: where the window is cut, for the callers that cut it
    "FIT_SPLIT",
    "METHOD",
    "TOKEN_SPLIT",
    "Attribution",
    "Part",
    "RequestEnergy",
    "StepSpan",
    "attribute",
    "spans",
]

FIT_SPLIT = "linear_fit"
TOKEN_SPLIT = "token_share"
METHOD = (
    "linear step model E = a x prefill tokens + b x decode tokens + P_static x step seconds + "
    "P_between x seconds between steps + k x context tokens read, least squares over "
    "intervals of the window no shorter than four times the power timeline's resolution (each "
    "engine step where the timeline resolves it), the steps moved by the power timeline's "
    "estimated lag; an interval's energy shared by its spans' fitted costs, a step's half by "
    "each part's fitted cost (static power by each part's share of the step's time) and half "
    "by its share of the step's time alone; 95 % intervals from the fit's Newey-West "
    "covariance and residuals, widened by the distance to either sharing and by the lag's "
    "range"
)

# Where the fit cannot be used, any costs >= 0 may hold: a fraction's extremes over them lie at
# these corners (one cost each), so the token-share split's bound covers every such split.
_ANY_COSTS: tuple[Coefficients, ...] = (
    (1.0, 0.0, 0.0, 0.0, 0.0),
    (0.0, 1.0, 0.0, 0.0, 0.0),
    (0.0, 0.0, 1.0, 0.0, 0.0),
)
BY_TIME = 0.5  # a step's split: half by the fitted costs, half by time alone (module docstring)
_BOUNDED = ("prefill", "decode", "between", "unattributed", "req")  # figures with a bound


@dataclass(frozen=True)
class Part:
    """Energy with its worst-case bound and its 95 % interval's half-width (J; None: no
    interval, ``Attribution.interval_null_reason`` says why)."""

    energy_j: float
    bound_j: float
    ci95_j: float | None = None

    @property
    def resolved(self) -> bool:
        """Whether the figure says anything: its 95 % interval is no wider than itself."""
        return self.ci95_j is None or 2 * self.ci95_j <= abs(self.energy_j)


@dataclass(frozen=True)
class RequestEnergy:
    request_id: int
    energy_j: float
    bound_j: float
    prefill_j: float
    decode_j: float
    ci95_j: float | None = None  # the 95 % interval's half-width of energy_j

    @property
    def resolved(self) -> bool:
        return self.ci95_j is None or 2 * self.ci95_j <= abs(self.energy_j)


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
    lag_s: float = 0.0  # how far the steps were moved to meet the power timeline
    lag_null_reason: str | None = None  # why the lag was not estimated (then 0)
    # the fitted coefficients' 95 % half-widths (``llem.figures.interval``), by fit name
    coefficient_ci95: dict[str, float] = field(default_factory=dict)
    interval_null_reason: str | None = None  # why the figures have no interval


def attribute(
    cut: Sequence[StepSpan],
    energy_j: Sequence[float],
    timing_bound_j: Sequence[float],
    scale_relative: float = 0.0,
    bins: Bins | None = None,
    *,
    spread: bool = True,
) -> Attribution:
    """The fit, the phase split and each request's energy (module docstring); ``bins``: the
    intervals (every span its own, with its own timing bound, where None). ``spread`` False: the
    figures alone, without the bounds' corners or the intervals (the bounds then leave out how
    far the coefficients move the split)."""
    b = bins or per_span(energy_j, timing_bound_j)
    rows = interval_rows(cut, b.groups)
    fit = fit_steps(
        rows, b.energy_j, [0.0] * len(rows), scale_relative, lambda w: linear_bound(list(w), b)
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
    sharing = Sharing(cut, b, step_pace(cut), BY_TIME if why is None else 0.0)
    weights, figures, coefficient_ci95 = _shared(
        sharing, fit, rows, (coeffs, box), why is None and spread, spread, scale_relative
    )
    interval_why = _NO_FIT_INTERVAL if why is not None else None
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
        span_energy_j=_span_energies(sharing, coeffs),
        coefficient_ci95=coefficient_ci95,
        interval_null_reason=interval_why,
    )


def _shared(
    sharing: Sharing,
    fit: Fit,
    rows: list[StepRow],
    model: tuple[Coefficients, list[Coefficients]],
    with_interval: bool,
    spread: bool,
    scale_relative: float,
) -> tuple[IntervalWeights, dict[Key, Part], dict[str, float]]:
    """Each span's parts' weights at the fitted ``model`` (costs, and the corners of their box),
    each figure with its bound (over the corners, where ``spread``) and, ``with_interval``, its
    95% half-width, and the coefficients' half-widths."""
    coeffs, box = model
    b = sharing.bins
    total = sum(b.energy_j)
    weights = sharing.weights(coeffs)
    moved = [sharing.values(corner) for corner in box] if spread else []
    keys = set(weights).union(*moved)  # a figure that is 0 at the point may not be at a corner
    figures = {
        k: _figure(k, weights, moved, b, scale_relative, total) for k in keys if k[0] in _BOUNDED
    }
    coefficient_ci95: dict[str, float] = {}
    if with_interval:
        half, coefficient_ci95 = figure_intervals(
            sharing, fit, rows, lambda v: _costs(fit, v), weights, scale_relative
        )
        figures = {k: replace(f, ci95_j=half.get(k, 0.0)) for k, f in figures.items()}
    return weights, figures, coefficient_ci95


def _figure(
    key: Key,
    weights: IntervalWeights,
    moved: Sequence[Mapping[Key, float]],
    b: Bins,
    scale_relative: float,
    total: float,
) -> Part:
    """A figure ``sum_i w_i E_i`` with its bound (module docstring)."""
    w = weights.get(key, {})
    value = _value(w, b)
    timing = sparse_bound(w, b)
    shift = max((abs(m.get(key, 0.0) - value) for m in moved), default=0.0)
    bound = timing + scale_relative * abs(value) + shift
    cap = total * (1.0 + scale_relative)
    return Part(value, min(bound, max(value, cap - value)))


def _value(w: dict[int, float], b: Bins) -> float:
    return sum(x * b.energy_j[i] for i, x in w.items())


def _split_model(fit: Fit) -> tuple[Coefficients, list[Coefficients], str | None]:
    """The coefficients a split uses, the corners of their bound box, and why the fit was not
    used (None when it was). ``P_between`` not fitted: ``P_static``, anywhere from 0 to its
    upper bound."""
    unusable = [c for c in (fit.a, fit.b, fit.p_static) if not _usable(c)]
    if unusable:
        missing = [c.null_reason or _BELOW_ZERO for c in unusable]
        return (1.0, 1.0, 0.0, 0.0, 0.0), list(_ANY_COSTS), "; ".join(missing)
    ranges = []
    for c in (fit.a, fit.b, fit.p_static):
        v, d = float(c.usable or 0.0), float(c.timing_bound or 0.0)
        ranges.append((max(v - d, 0.0), max(v + d, 0.0)))
    gap = fit.p_between
    if not _usable(gap):
        ranges.append((0.0, ranges[2][1]))
    else:
        v, d = float(gap.usable or 0.0), float(gap.timing_bound or 0.0)
        ranges.append((max(v - d, 0.0), max(v + d, 0.0)))
    if _usable(fit.k):  # the context cost; 0 where it is not fitted
        v, d = float(fit.k.usable or 0.0), float(fit.k.timing_bound or 0.0)
        ranges.append((max(v - d, 0.0), max(v + d, 0.0)))
    else:
        ranges.append((0.0, 0.0))
    corners = sorted({(a, b, p, g, k) for a, b, p, g, k in itertools.product(*ranges)})
    return _costs(fit, {}), corners, None


def _costs(fit: Fit, fitted: Mapping[str, float]) -> Coefficients:
    """The costs a split uses where the fitted values are ``fitted`` (the fit's own for a name
    not in it): a cost below 0 is 0; ``P_between`` is ``P_static`` where it is not fitted; ``k``
    is 0 where it is not usable."""

    def cost(name: str) -> float:
        return max(float(fitted.get(name, fit.coefficient(name).usable or 0.0)), 0.0)

    p_static = cost("p_static")
    gap = cost("p_between") if _usable(fit.p_between) else p_static
    return (cost("a"), cost("b"), p_static, gap, cost("k") if _usable(fit.k) else 0.0)


_NO_FIT_INTERVAL = (
    "no interval: the split is by token share, an assumption the window cannot test, not by a "
    "fitted model"
)
_BELOW_ZERO = "not resolved: the fitted cost and its whole bound are below 0, which no cost is"


def _usable(c: Coefficient) -> bool:
    """A split may use a fitted coefficient whose bound reaches 0 or above: one whose whole bound
    is below 0 says the model does not hold there (a cost is never negative)."""
    v = c.usable
    return v is not None and v + float(c.timing_bound or 0.0) > 0


def _requests(
    figures: dict[Key, Part], weights: IntervalWeights, b: Bins
) -> tuple[dict[int, RequestEnergy] | None, str | None]:
    ids = sorted(rid for kind, rid in figures if kind == "req")
    if not ids:
        return None, "no engine step says which requests ran in it"
    out = {}
    for rid in ids:
        r = figures[("req", rid)]
        pre = _value(weights.get(("req_prefill", rid), {}), b)
        dec = _value(weights.get(("req_decode", rid), {}), b)
        out[rid] = RequestEnergy(rid, r.energy_j, r.bound_j, pre, dec, r.ci95_j)
    return out, None


def _span_energies(sharing: Sharing, c: Coefficients) -> tuple[float, ...]:
    """Each span's share of its interval's energy (J), span by span."""
    energy = [sharing.bins.energy_j[k] for k in sharing.group.tolist()]
    return tuple(g * e for g, e in zip(sharing.span_shares(c).tolist(), energy, strict=True))

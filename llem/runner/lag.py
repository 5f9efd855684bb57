"""How far the power timeline lags the engine's steps, estimated from the window itself.

A power sensor reports the draw late (its averaging, the driver's refresh; MLPerf Power and Zeus
both align power to work with an offset), and a sampler reads each reading some time after the
sensor took it (at 10 Hz, a sample 80 ms into one of NVML's 100 ms refresh windows shows the draw
of that window's first 25 ms): energy a step drew at ``t`` appears in the timeline at ``t + lag``.
Read with no lag, each interval's energy is partly its predecessor's, which moves the split between
phases and requests (on the truth harness a 130 ms lag moved prefill energy by 35 %). The lag is
estimated as the one, among ``CANDIDATES_S``, that makes the step model fit the intervals' energies
best: the steps are moved ``lag`` later, cut into the shortest intervals the timeline resolves
(``llem.figures.bins.MIN_RESOLUTIONS`` resolutions: the lag shows in when the energy comes, which
longer intervals blur), and the model (``llem.figures.energy_fit``'s regressors) is fitted by least
squares; the lag with the least residual variance (residual sum of squares over the degrees of
freedom) wins, refined to the vertex of the parabola through it and its two neighbours. The lags
the window cannot tell from it are those whose residual sum of squares is within the profile
likelihood's 95 % of the least (``n log(RSS / RSS_min) <= 3.84`` over ``n`` intervals), and at
least half a grid step either side: the figures' intervals carry how far the figures move across
that range (``llem.runner.attribution``). A lag past the window's end moves the last steps out of
it: they are kept, ending at the window's end.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llem.figures.attribution import Attribution, Part, RequestEnergy
from llem.figures.bins import MIN_RESOLUTIONS, group
from llem.figures.step_shares import StepSpan, interval_rows, spans
from llem.measure.span_energy import SpanEnergies
from llem.vocabulary.workload import EngineStep

GRID_S = 0.025
# 0 to 400 ms: a sensor's own lag (MLPerf Power and Zeus see up to about 200 ms) plus up to one
# 100 ms refresh window of the sampler's phase, and room for the parabola's vertex beyond both
CANDIDATES_S = tuple(GRID_S * k for k in range(17))
CHI2_95 = 3.841  # the chi-squared distribution's 95th percentile, one degree of freedom
Measure = Callable[[Sequence[float]], SpanEnergies | str]


def shifted(steps: Sequence[EngineStep], lag_s: float, t1: float) -> list[EngineStep]:
    """``steps`` moved ``lag_s`` later, none past ``t1`` (a step moved past it ends there)."""
    if not lag_s:
        return list(steps)
    out = []
    for s in steps:
        end = min(s.end_s + lag_s, t1)
        start = None if s.start_s is None else min(s.start_s + lag_s, end)
        out.append(EngineStep(end, s.running, s.prefill_tokens, s.decode_tokens, start, s.shares))
    return out


def misfit(cut: Sequence[StepSpan], measure: Measure) -> tuple[float, int] | None:
    """The step model's residual variance over the intervals of ``cut`` and how many intervals
    it was fitted over (None: not fitted)."""
    import numpy as np

    got = measure([s.start_s for s in cut] + [cut[-1].end_s])
    if isinstance(got, str):
        return None
    groups = group([s.end_s - s.start_s for s in cut], MIN_RESOLUTIONS * got.resolution_s)
    x = np.array([list(r.regressors) for r in interval_rows(cut, groups)], dtype=float)
    y = np.array([sum(got.energy_j[lo:hi]) for lo, hi in groups])
    x = x[:, np.any(x, axis=0)]
    dof = len(y) - int(np.linalg.matrix_rank(x))
    if dof <= 0:
        return None
    resid = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    return float(resid @ resid) / dof, len(y)


@dataclass(frozen=True)
class Lag:
    """The estimated lag (s), the range of lags the window cannot tell from it (``low_s`` to
    ``high_s``, module docstring), and why it is 0 where none could be estimated."""

    lag_s: float
    low_s: float
    high_s: float
    null_reason: str | None = None


def estimate_lag(steps: Sequence[EngineStep], t0: float, t1: float, measure: Measure) -> Lag:
    """The lag that fits best and the range that fits about as well (module docstring)."""
    fits: dict[float, tuple[float, int]] = {}
    for lag in CANDIDATES_S:
        cut = spans(shifted(steps, lag, t1), t0, t1)
        if any(s.step is not None for s in cut):
            got = misfit(cut, measure)
            if got is not None:
                fits[lag] = got
    if not fits:
        why = "not estimated: the step model could not be fitted at any lag; taken as 0"
        return Lag(0.0, 0.0, 0.0, why)
    best = min(fits, key=lambda lag: fits[lag][0])
    lag = _vertex(best, {k: v[0] for k, v in fits.items()})
    return Lag(lag, *lag_range(fits, lag))


def lag_range(fits: dict[float, tuple[float, int]], lag: float) -> tuple[float, float]:
    """The lags whose fit (residual variance, intervals) the window cannot tell from the best
    (module docstring), and at least half a grid step either side of ``lag``."""
    least, n = min(fits.values())
    near = [k for k, (v, _) in fits.items() if v <= least * math.exp(CHI2_95 / n)]
    half = GRID_S / 2
    return max(min([*near, lag - half]), 0.0), max([*near, lag + half])


def _vertex(best: float, fits: dict[float, float]) -> float:
    """The minimum of the parabola through ``best`` and its neighbours on the grid, kept within
    half a grid step of ``best`` (``best`` itself at the grid's ends)."""
    i = CANDIDATES_S.index(best)
    if i == 0 or i == len(CANDIDATES_S) - 1:
        return best
    lo, hi = CANDIDATES_S[i - 1], CANDIDATES_S[i + 1]
    if lo not in fits or hi not in fits:
        return best
    y0, y1, y2 = fits[lo], fits[best], fits[hi]
    curve = y0 - 2 * y1 + y2
    if curve <= 0:
        return best
    step = hi - best
    move = 0.5 * step * (y0 - y2) / curve
    return best + max(-step / 2, min(step / 2, move))


def with_lag_spread(att: Attribution, others: Sequence[Attribution]) -> Attribution:
    """``att`` with each figure's 95 % half-width widened by how far the figure moves at the
    other lags the window cannot tell from the estimate (``others``: the attributions there),
    added in quadrature; a figure without an interval keeps none."""
    if not others:
        return att

    def moved(value: float, pick: Callable[[Attribution], float | None]) -> float:
        return max((abs(v - value) for o in others if (v := pick(o)) is not None), default=0.0)

    def widen(p: Part | None, name: str) -> Part | None:
        if p is None or p.ci95_j is None:
            return p
        d = moved(p.energy_j, lambda o: _energy(getattr(o, name)))
        return dataclasses.replace(p, ci95_j=math.hypot(p.ci95_j, d))

    requests = att.requests
    if requests is not None:
        requests = {rid: _widen_request(r, others, moved) for rid, r in requests.items()}
    return dataclasses.replace(
        att,
        prefill=widen(att.prefill, "prefill"),
        decode=widen(att.decode, "decode"),
        between=widen(att.between, "between"),
        unattributed=widen(att.unattributed, "unattributed"),
        requests=requests,
    )


def _widen_request(
    r: RequestEnergy,
    others: Sequence[Attribution],
    moved: Callable[[float, Callable[[Attribution], float | None]], float],
) -> RequestEnergy:
    if r.ci95_j is None:
        return r
    d = moved(r.energy_j, lambda o: _request(o, r.request_id))
    return dataclasses.replace(r, ci95_j=math.hypot(r.ci95_j, d))


def _energy(p: Part | None) -> float | None:
    return None if p is None else p.energy_j


def _request(att: Attribution, rid: int) -> float | None:
    r = (att.requests or {}).get(rid)
    return None if r is None else r.energy_j

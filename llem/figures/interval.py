"""The 95 % interval of each attributed figure: how far the figure would move were the window
measured again, from the fit's covariance with the model's misfit.

Every figure is a weighted sum of the intervals' energies whose weights depend on the fitted
coefficients, ``F = sum_i w_i(theta) E_i`` (``llem.figures.attribution``). Its variance has three
parts, added:

* the coefficients': ``g' V g``, ``g`` the figure's gradient in the coefficients (central
  differences of one standard error, through the same mapping from fitted values to the costs the
  split uses: negative costs taken as 0, ``P_between`` following ``P_static`` where it is not
  fitted) and ``V`` their covariance estimated from the residuals with the misfit in them: the
  heteroscedasticity- and autocorrelation-consistent (Newey-West) sandwich over ``LAGS``
  neighbouring intervals, since adjacent intervals share the energy the timeline moves across
  their edge, and a model that does not fit leaves residuals that run in streaks;
* the intervals' own unexplained energy: each interval's residual counts as noise in its energy,
  carried into the figure by its weight, with the same Newey-West weights between neighbours
  (``sum_l k_l sum_i u_i u_{i+l}``, ``u_i = w_i r_i``);
* the window's own relative bound (counter, sensor) as a uniform error: ``(rho F)^2 / 3``.

The half-width is ``1.96`` standard deviations of these, and then, added in quadrature, how far
the figure is from the figure were each step shared between its parts by time alone
(``TIME_SHARE``): how a step's energy divides between what ran in it is a convention the
window's energies cannot test (the same step energies follow from either), so the figure takes
the middle of the fitted costs' split and the time split (``llem.figures.attribution``) and the
interval reaches both (on the truth harness the physics shares by busy time: the fitted costs'
split of the held-out scenario's prefill was 10-12 % above it, the time split 15 % below). The
estimated sensor lag's range is carried by the caller (``llem.runner.lag``). Not covered: a cost
that is not linear in what the steps report beyond what the residuals show. Its coverage is
measured on the truth harness (``bench/attribution.py``), not assumed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from llem.figures.energy_fit import NAMES, Fit, StepRow
from llem.figures.share_weights import Sharing
from llem.figures.step_shares import TIME_SHARE, Coefficients, IntervalWeights, Key

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

K = TypeVar("K")

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile
LAGS = 3  # neighbouring intervals whose errors are taken as correlated (Newey-West)


def newey_west(u: ArrayLike, lags: int = LAGS) -> NDArray[np.float64]:
    """``sum_l k_l sum_t (u_t u_{t-l}' + u_{t-l} u_t')`` over the rows of ``u`` (Bartlett
    weights ``k_l = 1 - l / (lags + 1)``, ``k_0`` counted once)."""
    import numpy as np

    u = np.atleast_2d(np.asarray(u, dtype=float))
    s: NDArray[np.float64] = u.T @ u
    for lag in range(1, min(lags, len(u) - 1) + 1):
        k = 1.0 - lag / (lags + 1)
        c = u[lag:].T @ u[:-lag]
        s = s + k * (c + c.T)
    return s


def coefficient_covariance(x: ArrayLike, resid: ArrayLike, lags: int = LAGS) -> NDArray[np.float64]:
    """The sandwich ``(X'X)^-1 S (X'X)^-1``, ``S = newey_west(X r)``, scaled by ``n / (n - p)``."""
    import numpy as np

    x = np.asarray(x, dtype=float)
    r = np.asarray(resid, dtype=float)
    n, p = x.shape
    bread = np.linalg.pinv(x.T @ x)
    meat = newey_west(x * r[:, None], lags)
    cov: NDArray[np.float64] = bread @ meat @ bread * (n / max(n - p, 1))
    return cov


def residual_variance(weights: Mapping[int, float], resid: Sequence[float]) -> float:
    """The variance a figure of ``weights`` (interval -> weight) takes from the intervals'
    residuals (module docstring)."""
    if not weights:
        return 0.0
    first, last = min(weights), max(weights)
    u = [weights.get(i, 0.0) * resid[i] for i in range(first, last + 1)]
    total = sum(x * x for x in u)
    for lag in range(1, min(LAGS, len(u) - 1) + 1):
        k = 1.0 - lag / (LAGS + 1)
        total += 2 * k * sum(u[i] * u[i - lag] for i in range(lag, len(u)))
    return max(total, 0.0)


def gradients(
    value_at: Callable[[Sequence[float]], Mapping[K, float]],
    fitted: Sequence[float],
    steps: Sequence[float],
) -> dict[K, list[float]]:
    """Each figure's derivative in each fitted coefficient, by central differences of ``steps``
    (``value_at``: the figures at the given fitted values)."""
    out: dict[K, list[float]] = {}
    for j, h in enumerate(steps):
        up, down = list(fitted), list(fitted)
        up[j] += h
        down[j] -= h
        hi, lo = value_at(up), value_at(down)
        for key in set(hi) | set(lo):
            d = (hi.get(key, 0.0) - lo.get(key, 0.0)) / (2 * h) if h else 0.0
            out.setdefault(key, [0.0] * len(steps))[j] = d
    return out


def half_width(
    gradient: Sequence[float] | None,
    covariance: ArrayLike,
    residual_var: float,
    value: float,
    scale_relative: float,
) -> float:
    """``Z95`` standard deviations of the figure (module docstring)."""
    import numpy as np

    var = residual_var + (scale_relative * value) ** 2 / 3.0
    if gradient is not None and len(gradient):
        g = np.asarray(gradient, dtype=float)
        var += float(g @ np.asarray(covariance) @ g)
    return Z95 * float(np.sqrt(max(var, 0.0)))


def figure_intervals(
    sharing: Sharing,
    fit: Fit,
    rows: Sequence[StepRow],
    costs_of: Callable[[Mapping[str, float]], Coefficients],
    weights: IntervalWeights,
    scale_relative: float,
) -> tuple[dict[Key, float], dict[str, float]]:
    """Each figure's 95 % half-width (same unit as the figure) and each fitted coefficient's
    (module docstring). ``costs_of``: the costs a split uses at given fitted values."""
    import numpy as np

    names = [n for n in NAMES if fit.coefficient(n).usable is not None]
    if not names:
        return {}, {}
    beta = np.array([float(fit.coefficient(n).usable or 0.0) for n in names])
    cols = [NAMES.index(n) for n in names]
    x = np.array([list(r.regressors) for r in rows], dtype=float)[:, cols]
    b = sharing.bins
    resid = np.asarray(b.energy_j, dtype=float) - x @ beta
    cov = coefficient_covariance(x, resid)
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    steps = [
        float(s) if s > 0 else max(abs(v) * 1e-3, 1e-12) for s, v in zip(se, beta, strict=True)
    ]

    def value_at(fitted: Sequence[float]) -> dict[Key, float]:
        return sharing.values(costs_of(dict(zip(names, fitted, strict=True))))

    grads = gradients(value_at, list(beta), steps)
    by_time = sharing.values(costs_of({}), TIME_SHARE)
    r = list(resid)
    out = {}
    for key, w in weights.items():
        value = sum(x * b.energy_j[i] for i, x in w.items())
        other = by_time.get(key, 0.0)
        half = half_width(grads.get(key), cov, residual_variance(w, r), value, scale_relative)
        out[key] = math.hypot(half, other - value)
    return out, {n: Z95 * float(s) for n, s in zip(names, se, strict=True)}

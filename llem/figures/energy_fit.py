"""The linear energy model of engine steps, fitted by least squares over intervals of a window
(each an engine step, or consecutive steps and the gaps between them, ``llem.figures.bins``):

    E_interval = a x prefill tokens + b x decode tokens + P_static x step seconds
                 + P_between x seconds between steps + k x context tokens read

``a`` is joules per prefill token, ``b`` joules per decode token, ``P_static`` watts drawn while a
step runs whatever it computes, ``P_between`` watts between steps (fitted only where some interval
holds time between steps), ``k`` joules per token of context a step reads (each request's KV cache,
the tokens it holds before the step: decode reads it, prefill attention runs over it; fitted only
where the steps say which requests ran). Each coefficient carries its standard error (from the
residuals: ``s^2 (X'X)^-1``, ``s^2 = RSS / (n - rank)``) and a worst-case bound from the intervals'
energy bounds: the timing part is how far the coefficient moves when every interval's energy moves
within its timing bound (``L`` the least-squares solution operator: by default ``sum_i |L_ji| x
timing_i``; ``bound_of`` gives a tighter one where the intervals' errors are tied, as adjacent
intervals' are: ``llem.figures.bins.linear_bound``) ``+ rho x |coefficient|`` (a relative error
``rho`` common to every interval scales every coefficient alike). The model's own misfit is what the
standard error and R^2 show. R^2 is the centred one, ``1 - RSS / sum (E - mean E)^2``. The standard
error means what it says only where the intervals' errors are independent: intervals no shorter than
the power timeline's resolution (``llem.figures.bins``), not steps shorter than it, whose energies a
coarse timeline smooths (regressors then explain a smoothed energy, and the coefficients shrink
while the residuals stay small).

A coefficient the steps cannot separate is null with the reason, never a number (the context
term ``k`` is dropped from the fit where its fitted value is not above 0, so that a cost the
split does not use does not move the others): no step computed
prefill tokens (``a``), none decoded (``b``), or the columns are collinear (one prefill step at
batch 1 whose decode steps all have the same duration; every step the same shape). A coefficient
that is fitted but not above zero, or within two standard errors of zero, is null with the reason
too (a static batch decodes the same number of tokens every step, so its J per decode token and
static power trade off: an H100 run at batch 64 fitted -0.0025 ± 0.0072 J per decode token),
and so is one whose part of the window's energy is below ``NEGLIGIBLE`` (1e-9: the floating-point
leftovers of an exact fit where the power does not depend on the tokens, which pass the test of
two standard errors: 9.21e-15 ± 9.2e-24 J per prefill token at constant power). Only
identified coefficients are reported: their least-squares values do not depend on how the others
are chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray

NAMES = ("a", "b", "p_static", "p_between", "k")
_WHAT = {
    "a": "prefill tokens",
    "b": "decode tokens",
    "p_static": "step duration",
    "p_between": "time between steps",
    "k": "context tokens read",
}
_NOT_FITTED = {
    "p_between": "not fitted: no interval holds time between steps",
    "k": "not fitted: no step says which requests ran, so no context is known",
}
#: a coefficient whose part of the window's energy is below this is no cost: 0 in truth
NEGLIGIBLE = 1e-9
_RANK_TOL = 1e-9  # singular values below this x the largest (columns scaled to unit norm) are 0


@dataclass(frozen=True)
class Coefficient:
    """A fitted coefficient (J/token or W), its standard error and worst-case bound, or null."""

    value: float | None
    se: float | None = None
    bound: float | None = None
    null_reason: str | None = None
    se_null_reason: str | None = None
    timing_bound: float | None = None  # the part of ``bound`` that can change shares
    # the least-squares value where it is not published for being unresolved (a split may still
    # use it, within its timing bound); None where the coefficient is not identified
    fitted: float | None = None

    @property
    def usable(self) -> float | None:
        """The value a split may use: the published one, else the unresolved fitted one."""
        return self.value if self.value is not None else self.fitted


@dataclass(frozen=True)
class Fit:
    a: Coefficient  # J per prefill token
    b: Coefficient  # J per decode token
    p_static: Coefficient  # W
    r2: float | None
    n_steps: int  # intervals fitted (engine steps where each is its own interval)
    r2_null_reason: str | None = None
    p_between: Coefficient = Coefficient(None, null_reason="no time between steps was fitted")
    k: Coefficient = Coefficient(None, null_reason="no context read was fitted")

    def coefficient(self, name: str) -> Coefficient:
        return {
            "a": self.a,
            "b": self.b,
            "p_static": self.p_static,
            "p_between": self.p_between,
            "k": self.k,
        }[name]


@dataclass(frozen=True)
class StepRow:
    """An interval's regressors: tokens, seconds in steps, seconds between steps."""

    prefill_tokens: int
    decode_tokens: int
    duration_s: float  # seconds in engine steps
    between_s: float = 0.0  # seconds between steps
    context_tokens: int = 0  # tokens of context the steps read (each request's, before it)

    @property
    def regressors(self) -> tuple[float, float, float, float, float]:
        """The row of the design matrix, in ``NAMES``' order."""
        return (
            self.prefill_tokens,
            self.decode_tokens,
            self.duration_s,
            self.between_s,
            self.context_tokens,
        )


def fit_steps(
    rows: Sequence[StepRow],
    energy_j: Sequence[float],
    timing_bound_j: Sequence[float],
    scale_relative: float = 0.0,
    bound_of: Callable[[NDArray[np.float64]], float] | None = None,
) -> Fit:
    """The fit over ``rows`` with their energies and energy bounds (module docstring);
    ``bound_of(w)``: the worst-case timing error of ``sum_i w_i E_i``."""
    import numpy as np

    n = len(rows)
    if n == 0:
        null = Coefficient(None, null_reason="no engine step in the window")
        return Fit(null, null, null, None, 0, "no engine step in the window")
    x = np.array([list(r.regressors) for r in rows], dtype=float)
    y = np.asarray(energy_j, dtype=float)
    reasons = _unidentified(x)
    keep = [j for j, name in enumerate(NAMES) if name not in reasons]
    xs = x[:, keep]
    solve = np.linalg.pinv(xs)
    beta = solve @ y
    last = len(NAMES) - 1
    if last in keep and beta[keep.index(last)] <= 0:  # no context cost: fitted without it
        reasons[NAMES[last]] = (
            f"not used: the fitted cost {float(beta[keep.index(last)]):.3g} is not above 0, so "
            "the model is fitted without it"
        )
        keep.remove(last)
        xs = x[:, keep]
        solve = np.linalg.pinv(xs)
        beta = solve @ y
    resid = y - xs @ beta
    rank = int(np.linalg.matrix_rank(xs)) if keep else 0
    se, se_reason = _standard_errors(xs, resid, n - rank)
    tau = np.asarray(timing_bound_j, dtype=float)
    timing = [bound_of(w) if bound_of else float(np.abs(w) @ tau) for w in solve]
    coefficients = {name: Coefficient(None, null_reason=why) for name, why in reasons.items()}
    for k, j in enumerate(keep):
        se_k = None if se is None else float(se[k])
        value, moved = float(beta[k]), float(timing[k])
        bound = moved + scale_relative * abs(value)
        share = abs(value) * float(np.abs(x[:, j]).sum()) / max(float(np.abs(y).sum()), 1e-300)
        unresolved = _unresolved(NAMES[j], value, se_k, share)
        coefficients[NAMES[j]] = (
            Coefficient(None, null_reason=unresolved, timing_bound=moved, fitted=value)
            if unresolved
            else Coefficient(value, se_k, bound, None, se_reason, moved)
        )
    r2, r2_reason = _r2(y, resid)
    c = coefficients
    return Fit(c["a"], c["b"], c["p_static"], r2, n, r2_reason, c["p_between"], c["k"])


def _unresolved(name: str, value: float, se: float | None, share: float) -> str | None:
    """Why a fitted coefficient is not published: a cost below zero, one whose part of the
    window's energy (``share``: its value x its column's sum over the window's energy) is
    negligible (``NEGLIGIBLE``: the floating-point leftovers of an exact fit, where the power
    does not depend on it), or one that does not differ from zero by two standard errors (its
    column varies too little across the steps beside the others: a static batch decodes the same
    number of tokens in every step, so J per decode token and static power trade off)."""
    what = f"{value:.3g}" + ("" if se is None else f" ± {se:.2g} (1 s.e.)")
    if value <= 0:
        return f"not resolved: the fitted value {what} is not above 0"
    if share < NEGLIGIBLE:
        return (
            f"not resolved: the fitted value {what} accounts for {share:.2g} of the window's "
            f"energy, below {NEGLIGIBLE:g}: nothing the window's energy shows (the power does "
            f"not depend on the {_WHAT[name]})"
        )
    if se is not None and value < 2 * se:
        return (
            f"not resolved: the fitted value {what} is within 2 standard errors of 0; "
            f"{_WHAT[name]} vary too little across the window's steps beside the other terms"
        )
    return None


def _unidentified(x: object) -> dict[str, str]:
    """Coefficient name -> why the steps cannot identify it. The context term ``k`` is the last
    to enter: where it is collinear with the others, it alone is dropped."""
    import numpy as np

    m = np.asarray(x)
    reasons: dict[str, str] = {}
    for j, name in enumerate(NAMES):
        if not np.any(m[:, j]):
            reasons[name] = _NOT_FITTED.get(
                name, f"not identified: no step in the window has {_WHAT[name]}"
            )
    keep = [j for j, name in enumerate(NAMES[:-1]) if name not in reasons]
    if not keep:
        return reasons
    scaled = m / np.maximum(np.linalg.norm(m, axis=0), 1e-300)
    full = _rank(scaled[:, keep])
    for k, j in enumerate(keep):
        if _rank(np.delete(scaled[:, keep], k, axis=1)) == full:
            reasons[NAMES[j]] = _collinear(j, [i for i in keep if i != j], m.shape[0])
    last = len(NAMES) - 1
    if NAMES[last] not in reasons and _rank(scaled[:, [*keep, last]]) == full:
        reasons[NAMES[last]] = _collinear(last, keep, m.shape[0])
    return reasons


def _collinear(j: int, others: Sequence[int], n: int) -> str:
    names = " and ".join(_WHAT[NAMES[i]] for i in others)
    return (
        f"not identified: {_WHAT[NAMES[j]]} are collinear with {names} over the "
        f"window's {n} intervals (every interval has the same shape)"
    )


def _rank(m: object) -> int:
    import numpy as np

    a = np.asarray(m)
    if a.size == 0 or a.shape[1] == 0:
        return 0
    s = np.linalg.svd(a, compute_uv=False)
    return int(np.sum(s > _RANK_TOL * s[0])) if s[0] > 0 else 0


def _standard_errors(
    xs: ArrayLike, resid: ArrayLike, dof: int
) -> tuple[NDArray[np.float64] | None, str | None]:
    import numpy as np

    if dof <= 0:
        return None, "no residual degrees of freedom: as many steps as identified coefficients"
    r = np.asarray(resid)
    s2 = float(r @ r) / dof
    cov = s2 * np.linalg.pinv(np.asarray(xs).T @ np.asarray(xs))
    return np.sqrt(np.clip(np.diag(cov), 0.0, None)), None


def _r2(y: object, resid: object) -> tuple[float | None, str | None]:
    import numpy as np

    yy, r = np.asarray(y), np.asarray(resid)
    tss = float(np.sum((yy - yy.mean()) ** 2))
    if len(yy) < 2 or tss <= 0:
        return None, "every step has the same energy: R^2 is undefined"
    return 1.0 - float(r @ r) / tss, None

"""The energy of speculative decoding's draft work against the target's verification, from the
window's power timeline and the spans the engine recorded (``llem.vocabulary.speculation``).

The window ``[t0, t1]`` is cut into spans (``cut``): each draft (the candidate generator
proposing a step's tokens), each verification (from that draft's end to the target's verdict:
its forward pass over the candidates, the first with the prompt's prefill) and the rest
(``other``: between steps, between requests, tokenising). The spans are grouped into the
intervals the timeline resolves (``llem.figures.bins.interval_s``: two to four times its
resolution), each with its measured energy. Then (``split``):

* where every span is its own interval (a timeline finer than the spans: a replayed trace), the
  draft's energy is the sum of its spans' measured energies, and the verification's likewise;
* otherwise an interval holds drafts, verifications and other time together, and its energy is
  fitted by least squares as ``E_i = P_draft x d_i + P_verify x v_i + P_other x o_i`` (``d_i``,
  ``v_i``, ``o_i``: the interval's seconds drafting, verifying and otherwise; each ``P`` the mean
  power of that work, W). The draft's energy is ``P_draft x D`` (``D``: the window's seconds
  drafting), the verification's ``P_verify x V``. The fit needs the mix to vary across the
  intervals: where every interval holds the same mix, the columns are collinear and both figures
  are null with that reason. A mix that varies a little gives a wide interval, and the figure is
  then null where its interval is wider than itself (``llem.runner.attribution.with_interval``).

Why a fit of mean powers and not the attribution's sharing of each interval by fitted costs:
the truth to estimate is the energy drawn while drafting, ``sum`` over the draft spans of their
power; its least-squares estimate ``P_draft x D`` is a weighted sum of the intervals' energies
whose variance is the coefficient's, so the interval is the coefficient's covariance and nothing
else, where sharing each interval's measured energy would add each interval's residual to the
figure again. The two agree where every span is its own interval, which is read directly.

The 95 % interval. Fitted: ``t(0.975, n - p) x sqrt(D^2 Var(P_draft) + (rho F)^2 / 3)``, the
coefficients' covariance the heteroscedasticity- and autocorrelation-consistent sandwich of
``llem.figures.interval`` (neighbouring intervals share the energy the timeline moves across
their edge), ``rho`` the window's own relative bound (counter, sensor) taken as uniform, and
Student's t over the fit's ``n - p`` degrees of freedom since a short window has few intervals.
Summed per span: each interval's timing bound and each edge's moved energy as independent
uniform errors, with ``rho`` as above. The worst-case bound: ``llem.figures.bins.linear_bound``
of the figure's weights on the intervals, plus ``rho x |F|``. Its coverage is measured on the
truth harness (``llem.testing.truth.draft``), not assumed.

What a figure includes is what the measured devices draw while the work runs (the device
boundary of the window's energy): a draft model's forward passes on the GPU, but for prompt
lookup, whose proposing is a string search on the CPU, only the GPU's idle or static power over
those seconds (the CPU's own work is outside a GPU boundary).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from llem.figures.bins import Bins, linear_bound
from llem.figures.interval import Z95, coefficient_covariance
from llem.figures.student_t import t_quantile
from llem.vocabulary.speculation import Span

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

DRAFT, VERIFICATION, OTHER = range(3)  # what ran in a span (``WorkSpan.kind``)
_RANK_TOL = 1e-9  # singular values below this x the largest (columns scaled to unit norm) are 0

PER_SPAN = "per span: each draft's and verification's measured energy summed"
FITTED = (
    "least squares over {n} intervals: E = P_draft x s drafting + P_verify x s verifying + "
    "P_other x s otherwise; the draft's energy P_draft x its seconds, the verification's "
    "P_verify x its seconds"
)


@dataclass(frozen=True)
class WorkSpan:
    """A span of the window and what ran in it (``DRAFT``, ``VERIFICATION`` or ``OTHER``)."""

    start_s: float
    end_s: float
    kind: int


@dataclass(frozen=True)
class EnergyEstimate:
    """An energy (J) with its worst-case bound and its 95 % interval's half-width (J)."""

    energy_j: float
    bound_j: float
    ci95_j: float


@dataclass(frozen=True)
class DraftEnergy:
    """The draft's and the verification's energy over the window (null: ``null_reason``), the
    window's seconds of each and its energy (J), and how they were had (``method``)."""

    draft: EnergyEstimate | None
    verification: EnergyEstimate | None
    null_reason: str | None
    method: str
    draft_s: float
    verification_s: float
    window_j: float
    n_intervals: int
    power_w: tuple[float, float, float] | None = None  # fitted P_draft, P_verify, P_other
    lag_s: float = 0.0  # how far the spans were moved later to meet the power timeline


def cut(
    draft: Sequence[Span], verification: Sequence[Span], t0: float, t1: float
) -> list[WorkSpan]:
    """``[t0, t1]`` cut into the drafts and verifications inside it (clipped to it) and the other
    time between them. A span that starts before the previous one ended starts where it ended."""
    marked = sorted(
        [(a, b, DRAFT) for a, b in draft] + [(a, b, VERIFICATION) for a, b in verification]
    )
    out: list[WorkSpan] = []
    edge = t0
    for a, b, kind in marked:
        start, end = max(a, edge), min(b, t1)
        if end <= start:
            continue
        if start > edge:
            out.append(WorkSpan(edge, start, OTHER))
        out.append(WorkSpan(start, end, kind))
        edge = end
    if t1 > edge:
        out.append(WorkSpan(edge, t1, OTHER))
    return out


def cycles(spans: Sequence[WorkSpan], min_s: float) -> list[tuple[int, int]]:
    """The spans grouped into intervals of ``min_s`` or more that close only where a draft
    starts (whole steps: a draft, its verification and the time after it), a short remainder
    joining the last interval; every span its own interval where ``min_s`` is 0 (a timeline
    finer than the spans)."""
    if min_s <= 0:
        return [(i, i + 1) for i in range(len(spans))]
    out: list[tuple[int, int]] = []
    first, length = 0, 0.0
    for i, s in enumerate(spans):
        if length >= min_s and s.kind == DRAFT:
            out.append((first, i))
            first, length = i, 0.0
        length += s.end_s - s.start_s
    if first < len(spans):
        if out and length < min_s:
            out[-1] = (out[-1][0], len(spans))
        else:
            out.append((first, len(spans)))
    return out


def seconds(spans: Sequence[WorkSpan], groups: Sequence[tuple[int, int]]) -> list[list[float]]:
    """Each interval's seconds of each kind, in ``DRAFT``, ``VERIFICATION``, ``OTHER`` order."""
    rows = []
    for lo, hi in groups:
        row = [0.0, 0.0, 0.0]
        for s in spans[lo:hi]:
            row[s.kind] += s.end_s - s.start_s
        rows.append(row)
    return rows


def phase_seconds(spans: Sequence[WorkSpan]) -> tuple[float, float]:
    """The seconds drafting and the seconds verifying among ``spans``."""
    d = sum(s.end_s - s.start_s for s in spans if s.kind == DRAFT)
    return d, sum(s.end_s - s.start_s for s in spans if s.kind == VERIFICATION)


def split(spans: Sequence[WorkSpan], bins: Bins, scale_relative: float) -> DraftEnergy:
    """The draft's and the verification's energy over ``spans`` grouped as ``bins`` (module
    docstring); ``scale_relative``: the window's own relative bound."""
    rows = seconds(spans, bins.groups)
    totals = [sum(r[k] for r in rows) for k in range(3)]
    window_j = float(sum(bins.energy_j))
    base = DraftEnergy(
        None,
        None,
        "no draft and verification ran in the window",
        "",
        totals[DRAFT],
        totals[VERIFICATION],
        window_j,
        len(rows),
    )
    if totals[DRAFT] <= 0 or totals[VERIFICATION] <= 0:
        return base
    if all(hi - lo == 1 for lo, hi in bins.groups):
        draft, verify = (_summed(rows, bins, k, scale_relative) for k in (DRAFT, VERIFICATION))
        return dataclasses.replace(
            base, draft=draft, verification=verify, null_reason=None, method=PER_SPAN
        )
    return _fitted(rows, bins, totals, scale_relative, base)


def _summed(rows: Sequence[Sequence[float]], bins: Bins, kind: int, rho: float) -> EnergyEstimate:
    """The sum of the energies of the intervals (each one span) that are ``kind``."""
    w = [1.0 if r[kind] > 0 else 0.0 for r in rows]
    value = sum(x * e for x, e in zip(w, bins.energy_j, strict=True))
    return EnergyEstimate(
        value, linear_bound(w, bins) + rho * abs(value), _uniform_ci(w, bins, rho, value)
    )


def _uniform_ci(w: Sequence[float], bins: Bins, rho: float, value: float) -> float:
    """``Z95`` standard deviations of a weighted sum whose every interval's timing bound, edge
    bound and the window's relative bound are independent uniform errors."""
    edges = [0.0, *w, 0.0]
    var = sum(((edges[j] - edges[j + 1]) * e) ** 2 for j, e in enumerate(bins.edge_bound_j))
    var += sum((x * r) ** 2 for x, r in zip(w, bins.rest_bound_j, strict=True))
    var += (rho * value) ** 2
    return Z95 * math.sqrt(var / 3.0)


def _fitted(
    rows: Sequence[Sequence[float]],
    bins: Bins,
    totals: Sequence[float],
    rho: float,
    base: DraftEnergy,
) -> DraftEnergy:
    import numpy as np

    x_all = np.asarray(rows, dtype=float)
    cols = [k for k in range(3) if totals[k] > 0]
    x = x_all[:, cols]
    n, p = x.shape
    method = FITTED.format(n=n)
    if n <= p:
        why = (
            f"not separable: {n} intervals for {p} powers (drafting, verifying, otherwise); the "
            "window is too short for this sampling rate"
        )
        return dataclasses.replace(base, null_reason=why, method=method)
    if _rank(x) < p:
        why = (
            f"not separable: every one of the window's {n} intervals holds the same mix of "
            "drafting, verifying and other time, so their powers cannot be told apart "
            "(drafts and verifications of the same lengths throughout)"
        )
        return dataclasses.replace(base, null_reason=why, method=method)
    y = np.asarray(bins.energy_j, dtype=float)
    solve = np.linalg.pinv(x)
    beta = solve @ y
    cov = coefficient_covariance(x, y - x @ beta)
    quantile = t_quantile(0.975, n - p)
    out = []
    for k in (DRAFT, VERIFICATION):
        j = cols.index(k)
        value = float(beta[j] * totals[k])
        weights = [float(v) * totals[k] for v in solve[j]]
        var = totals[k] ** 2 * float(cov[j, j]) + (rho * value) ** 2 / 3.0
        bound = linear_bound(weights, bins) + rho * abs(value)
        out.append(EnergyEstimate(value, bound, quantile * math.sqrt(max(var, 0.0))))
    powers = [float(beta[cols.index(k)]) if k in cols else 0.0 for k in range(3)]
    return dataclasses.replace(
        base,
        draft=out[0],
        verification=out[1],
        null_reason=None,
        method=method,
        power_w=(powers[0], powers[1], powers[2]),
    )


def _rank(m: ArrayLike) -> int:
    import numpy as np

    a = np.asarray(m, dtype=float)
    scaled = a / np.maximum(np.linalg.norm(a, axis=0), 1e-300)
    s = np.linalg.svd(scaled, compute_uv=False)
    return int(np.sum(s > _RANK_TOL * s[0])) if s[0] > 0 else 0

"""Statistics over repeats: mean, standard deviation and a Student-t 95% confidence interval.

scipy is not a dependency, so the t quantile is computed here from the regularised incomplete
beta function (continued fraction, as in Numerical Recipes §6.4) and inverted by bisection. It
agrees with ``scipy.stats.t.ppf`` to better than 1e-6 (tested against reference values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence

import pandas as pd

if TYPE_CHECKING:
    from llem.report.load import Runs

__all__ = ["METRICS", "Summary", "summarise", "summary_frame", "t_cdf", "t_quantile"]


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t distribution with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    tail = 0.5 * _betai(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0.975, 2 → 4.302653)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie strictly between 0 and 1, got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation (ddof=1) and a two-sided CI over ``n`` values.

    ``std`` and the CI are None when n < 2 (one value says nothing about spread); ``mean`` is None
    when n == 0.
    """

    n: int
    mean: Optional[float]
    std: Optional[float]
    ci_half: Optional[float]

    @property
    def ci_low(self) -> Optional[float]:
        return None if self.mean is None or self.ci_half is None else self.mean - self.ci_half

    @property
    def ci_high(self) -> Optional[float]:
        return None if self.mean is None or self.ci_half is None else self.mean + self.ci_half


def _is_number(v: object) -> bool:
    if isinstance(v, bool) or v is None or v is pd.NA:
        return False
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(f)


def summarise(values: Iterable[object], confidence: float = 0.95) -> Summary:
    """Summarise the finite numbers in ``values``; None/NaN are ignored, never counted as 0."""
    xs = [float(v) for v in values if _is_number(v)]  # type: ignore[arg-type]
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None)
    mean = math.fsum(xs) / n
    if n == 1:
        return Summary(1, mean, None, None)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    std = math.sqrt(var)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, half)


# --------------------------------------------------------------------------- per configuration

#: result.json fields summarised over repeats (ok runs only), in summary.csv column order.
METRICS = (
    "throughput.output_tokens_per_s",
    "throughput.requests_per_s",
    "latency.generate_s",
    "latency.ttft_ms.p50",
    "latency.ttft_ms.p90",
    "latency.ttft_ms.p99",
    "latency.itl_ms.p50",
    "latency.itl_ms.p90",
    "latency.itl_ms.p99",
    "latency.request_latency_s.p50",
    "latency.request_latency_s.p90",
    "latency.request_latency_s.p99",
    "energy.total_j",
    "energy.idle_adjusted_j",
    "energy.j_per_output_token",
    "energy.j_per_request",
    "energy.avg_power_w",
    "energy.peak_power_w",
    "energy.cpu_package_j",
    "memory.peak_allocated_mb",
    "memory.peak_reserved_mb",
    "memory.peak_device_used_mb",
    "memory.peak_host_rss_mb",
)

STAT_SUFFIXES = ("n", "mean", "std", "ci95_half", "ci95_low", "ci95_high")


def status_label(statuses: Sequence[str]) -> str:
    """``["ok", "ok", "failed"]`` → ``"ok ×2, failed ×1"``; a single run → just its status."""
    counts: Dict[str, int] = {}
    for s in statuses:
        counts[s] = counts.get(s, 0) + 1
    order = ["ok", "failed", "skipped", "missing"]
    keys = sorted(counts, key=lambda s: (order.index(s) if s in order else len(order), s))
    if len(statuses) == 1:
        return keys[0]
    return ", ".join(f"{k} ×{counts[k]}" for k in keys)


def summary_frame(runs: Runs) -> pd.DataFrame:
    """One row per configuration (``config_hash``), knobs first, then n and the statistics.

    Columns: ``config_hash``, every override column except ``repeat``, ``n`` (ok runs), ``n_runs``,
    ``status`` (e.g. ``ok ×3`` or ``ok ×2, failed ×1``), ``run_dirs``, then for each metric in
    :data:`METRICS` present in the results: ``<metric>.n`` (ok runs with a value), ``.mean``,
    ``.std``, ``.ci95_half``, ``.ci95_low``, ``.ci95_high``. Statistics use ok runs only; empty
    cells where there is nothing to compute (std and CI need n >= 2).
    """
    from llem.report.load import REPEAT_KEY, typed_column

    frame = runs.frame
    keys = [k for k in runs.override_keys if k != REPEAT_KEY]
    metrics = [m for m in METRICS if m in frame.columns]
    groups: Dict[str, List[int]] = {}
    for i, h in enumerate(frame["config_hash"].astype(object).tolist()):
        groups.setdefault(str(h), []).append(i)

    rows: List[Dict[str, Any]] = []
    for config_hash, idx in groups.items():
        part = frame.iloc[idx]
        ok = part[part["status"] == "ok"]
        row: Dict[str, Any] = {"config_hash": config_hash}
        for k in keys:
            row[k] = _first(part[k].astype(object).tolist())
        row["n"] = len(ok)
        row["n_runs"] = len(part)
        row["status"] = status_label([str(s) for s in part["status"].tolist()])
        row["run_dirs"] = "; ".join(part["run_dir"].astype(str).tolist())
        for m in metrics:
            s = summarise(ok[m].astype(object).tolist())
            row[f"{m}.n"] = s.n
            row[f"{m}.mean"] = s.mean
            row[f"{m}.std"] = s.std
            row[f"{m}.ci95_half"] = s.ci_half
            row[f"{m}.ci95_low"] = s.ci_low
            row[f"{m}.ci95_high"] = s.ci_high
        rows.append(row)
    # runs.frame is already sorted by knob values, so groups keep that order (first run decides)
    columns = list(rows[0].keys()) if rows else ["config_hash"]
    out = {c: typed_column([r.get(c) for r in rows]) for c in columns}
    for m in metrics:  # statistics are floats even when every value happens to be whole
        for suffix in STAT_SUFFIXES[1:]:
            out[f"{m}.{suffix}"] = out[f"{m}.{suffix}"].astype("float64")
    return pd.DataFrame(out)


def _first(values: List[Any]) -> Any:
    from llem.report.load import is_missing

    for v in values:
        if not is_missing(v):
            return v
    return None

"""The statistics of one figure over repeats: mean, standard deviation, a 95% confidence interval
over the repeats, and, beside it and never inside it, the runs' own instrument bound.

**The interval.** For a figure with ``n >= 2`` values x_i the 95% CI is ``mean ± t × s / √n``: s
the sample standard deviation, t the 0.975 quantile of Student's t with n − 1 degrees of freedom.
It says how well the repeats pin down the mean of what the instrument reads. With fewer than two
values there is no interval over repeats, so there is none (not one borrowed from the bound).

**The bound.** ``bound`` is the mean of the runs' own worst-case bounds
(``energy.<figure>_uncertainty``: counter resolution and update period, the trapezoid bound, the
power average's lag, the sensor's accuracy; energy figures only). If each run is off by at most
u_i, the mean of the runs is off by at most the mean of the u_i. It is an instrument limit, not a
statistic: a systematic sensor error does not shrink with repeats. summary.csv has it in its own
column (``<figure>.bound_mean``) for one run and for many; who wants one interval for the mean of
the true values takes ``ci95_half + bound_mean`` (linearly: bounds are limits, not standard
deviations).

The t quantile comes from :mod:`llem.figures.student_t` (no scipy).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from llem.figures.student_t import t_quantile


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation (ddof=1) and a two-sided CI over ``n`` values.

    ``bound`` is the mean of the values' own uncertainty bounds (None when none has one); it is
    not part of ``ci_half`` (see the module docstring). ``std`` and the CI are None when n < 2;
    ``mean`` is None when n == 0.
    """

    n: int
    mean: float | None
    std: float | None
    ci_half: float | None
    bound: float | None = None

    @property
    def ci_low(self) -> float | None:
        return None if self.mean is None or self.ci_half is None else self.mean - self.ci_half

    @property
    def ci_high(self) -> float | None:
        return None if self.mean is None or self.ci_half is None else self.mean + self.ci_half


def _is_number(v: object) -> bool:
    if isinstance(v, bool) or v is None or v is pd.NA:
        return False
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(f)


def summarise(
    values: Iterable[object],
    confidence: float = 0.95,
    bounds: Iterable[object] | None = None,
) -> Summary:
    """Summarise the finite numbers in ``values``; None/NaN are ignored, never counted as 0.

    ``bounds``, when given, lines up with ``values``: each value's own worst-case uncertainty.
    Their mean (over the counted values that have one) is the summary's ``bound``, kept apart
    from the t half-width.
    """
    raw = list(values)
    raw_bounds = list(bounds) if bounds is not None else [None] * len(raw)
    if len(raw_bounds) != len(raw):
        raise ValueError(f"{len(raw_bounds)} bounds for {len(raw)} values")
    pairs = [(v, b) for v, b in zip(raw, raw_bounds, strict=True) if _is_number(v)]
    xs = [float(v) for v, _ in pairs]  # type: ignore[arg-type]
    us = [abs(float(b)) for _, b in pairs if _is_number(b)]  # type: ignore[arg-type]
    n = len(xs)
    if n == 0:
        return Summary(0, None, None, None)
    bound = math.fsum(us) / len(us) if us else None
    mean = math.fsum(xs) / n
    if n == 1:
        return Summary(1, mean, None, None, bound)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    std = math.sqrt(var)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, half, bound)

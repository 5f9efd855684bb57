"""Energy per prompt token and per decode token by difference, beside the fitted split.

The second method of the ``phase_energy`` study (``llem/conf/experiment/phase_energy.yaml``): the
same configuration run with exactly 1 new token per request and with exactly N, each repeated.
With ``e`` a run's ``energy.total_j`` per request, ``p`` its prompt tokens and ``q`` its output
tokens per request (``workload.requests``, ``input_tokens``, ``output_tokens``; per request, so
runs that made different numbers of passes over the prompts compare):

* decode J/token = (mean e_N - mean e_1) / (mean q_N - mean q_1);
* prefill J/prompt token = (mean e_1 - mean q_1 x decode J/token) / mean p: the 1-token run holds
  its one output token per request too (the prefill step computes it, and llem's steps count it
  as a decode token, as the fitted split does), so one decode token's worth is taken out.

Each is a linear combination of the two lengths' mean energies; its 95% interval is Student's t
with Welch's degrees of freedom over the repeats' spread (at least 2 runs of each length). It
assumes nothing about the sensor or the power timeline: only that the window's energy of each run
is right and that the repeats are alike. The interval covers the repeats' spread (run-to-run
variation, drift), not the energy source's own bound: a constant offset cancels in the difference,
a gain error (a sensor reading some percent high) scales both figures alike and is not in it. On
normal repeats it holds the truth 94-95 % of the time (tests/report/test_phase_energy_report.py).
A figure whose interval is wider than itself is null with the reason.

The fitted split's counterpart (``llem.figures.attribution``), from the N-token runs: their
``energy.prefill_j`` per prompt token and ``energy.decode_j`` per output token (static power
during the steps included, as in the difference), the runs' mean, ± the 95% interval of that
mean from each run's published one (``energy.prefill_j_ci95_half_width``,
``energy.decode_j_ci95_half_width``; the runs taken as independent: the root of the sum of their
squared half-widths over their number), so that interval meets interval. Null with the reason
where a run's fitted figure is null, where a run has no interval (results written before llem
published one: the worst-case bound is no 95% interval, so nothing stands in for it), and where
the interval is wider than the figure, as the difference's. Energy
between engine steps (``energy.between_steps_j``) is in neither of the split's figures but is in
the difference's (the 1-token runs' gaps in its prefill, the N-token runs' further gaps in its
decode), so its share of each length's window is given beside them. The two methods agree on a
figure when their intervals overlap.

Runs are paired when they have the same configuration but for ``decoder.max_new_tokens`` and
``decoder.min_new_tokens`` (the same values of every other swept knob, the same model, engine
and hardware: ``llem.report.hardware``'s key).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from llem.figures.student_t import t_quantile
from llem.report.cells import is_missing
from llem.report.hardware import Group, configuration_groups, hardware_label
from llem.report.load import Runs
from llem.report.stats import judged_invalid

#: the knobs that set the output length: the pair differs in them, and only in them
TOKEN_KEYS = ("decoder.max_new_tokens", "decoder.min_new_tokens")
LENGTH_KEY = TOKEN_KEYS[0]
#: result fields that must agree between the two lengths (besides the knobs)
SAME = ("model", "backend")
LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A figure (J per token) with its interval's half-width, or null with the reason."""

    value: float | None
    half_width: float | None = None
    null_reason: str | None = None

    @classmethod
    def null(cls, reason: str) -> Estimate:
        return cls(None, None, reason)

    def overlaps(self, other: Estimate) -> bool | None:
        """Whether the two intervals share a point; None when either is null."""
        if None in (self.value, self.half_width, other.value, other.half_width):
            return None
        gap = abs(float(self.value or 0.0) - float(other.value or 0.0))
        return gap <= float(self.half_width or 0.0) + float(other.half_width or 0.0)


@dataclass(frozen=True)
class PhaseComparison:
    """One configuration: its 1-token runs against its N-token runs."""

    label: str  # the other knobs' values (and the hardware where it differs)
    new_tokens: int  # N
    runs_1: int  # runs of each length that entered the figures
    runs_n: int
    prefill: Estimate  # J per prompt token, by difference
    decode: Estimate  # J per decode token, by difference
    fitted_prefill: Estimate  # the N-token runs' prefill_j per prompt token ± 95% interval
    fitted_decode: Estimate
    between_fraction_1: float | None  # the 1-token runs' mean between_steps_j / total_j
    between_fraction_n: float | None  # the N-token runs'

    @property
    def prefill_agrees(self) -> bool | None:
        return self.prefill.overlaps(self.fitted_prefill)

    @property
    def decode_agrees(self) -> bool | None:
        return self.decode.overlaps(self.fitted_decode)


# --------------------------------------------------------------------------- per run
def _number(frame: pd.DataFrame, row: int, key: str) -> float | None:
    if key not in frame.columns:
        return None
    value = frame[key].iloc[row]
    if is_missing(value) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _text(frame: pd.DataFrame, row: int, key: str) -> str | None:
    if key not in frame.columns or is_missing(frame[key].iloc[row]):
        return None
    return str(frame[key].iloc[row])


@dataclass(frozen=True)
class _Run:
    """One ok run's figures per request (e, p, q) and its fitted split."""

    e: float
    p: float
    q: float
    tokens_in: float
    tokens_out: float
    total_j: float
    prefill_j: float | None
    prefill_ci95: float | None  # the 95% interval's half-width of prefill_j
    decode_j: float | None
    decode_ci95: float | None
    between_j: float | None


def _runs_of(runs: Runs, group: Group, include_invalid: bool) -> tuple[list[_Run], list[str]]:
    """The group's ok runs with energy (invalid ones left out unless asked), and why the others
    have none."""
    frame, out, why = runs.frame, [], []
    for i in group.rows:
        if frame["status"].iloc[i] != "ok":
            continue
        if judged_invalid(frame["valid"].iloc[i]) and not include_invalid:
            why.append("energy judged invalid (validity.problems)")
            continue
        total, n = _number(frame, i, "energy.total_j"), _number(frame, i, "workload.requests")
        tin, tout = (
            _number(frame, i, "workload.input_tokens"),
            _number(frame, i, "workload.output_tokens"),
        )
        if total is None or not n or tin is None or tout is None:
            why.append(_text(frame, i, "energy.unavailable_reason") or "no energy measured")
            continue
        out.append(
            _Run(
                total / n, tin / n, tout / n, tin, tout, total,
                _number(frame, i, "energy.prefill_j"),
                _number(frame, i, "energy.prefill_j_ci95_half_width"),
                _number(frame, i, "energy.decode_j"),
                _number(frame, i, "energy.decode_j_ci95_half_width"),
                _number(frame, i, "energy.between_steps_j"),
            )
        )  # fmt: skip
    return out, why


# --------------------------------------------------------------------------- the difference
def _mean_var(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def combination(terms: Sequence[tuple[float, Sequence[float]]]) -> Estimate:
    """sum(c x mean(xs)) over ``terms`` with its 95% interval: Student's t with Welch's
    (Satterthwaite's) degrees of freedom; each ``xs`` needs at least 2 values."""
    value, var, df_den = 0.0, 0.0, 0.0
    for c, xs in terms:
        m, s2 = _mean_var(xs)
        value += c * m
        part = c * c * s2 / len(xs)
        var += part
        df_den += part * part / (len(xs) - 1)
    if var == 0.0:
        return Estimate(value, 0.0)
    half = t_quantile(0.5 + LEVEL / 2, var * var / df_den) * math.sqrt(var)
    return Estimate(value, half)


def _bounded(est: Estimate, what: str) -> Estimate:
    """The estimate, or null with the reason where its interval is wider than it."""
    if est.value is None or est.half_width is None or est.half_width <= abs(est.value):
        return est
    return Estimate.null(
        f"{what} {est.value:.3g} ±{est.half_width:.2g}: the interval is wider than the figure "
        "(the repeats' spread hides the difference: more repeats, or more new tokens)"
    )


def difference(one: Sequence[_Run], many: Sequence[_Run]) -> tuple[Estimate, Estimate]:
    """(prefill J per prompt token, decode J per token) by difference (module docstring)."""
    if len(one) < 2 or len(many) < 2:
        reason = (
            f"needs at least 2 runs of each length for an interval (1 new token: {len(one)}, "
            f"N: {len(many)})"
        )
        return Estimate.null(reason), Estimate.null(reason)
    p1, pn = (sum(r.p for r in rs) / len(rs) for rs in (one, many))
    if abs(p1 - pn) > 1e-9 * max(p1, pn):
        reason = f"the two lengths ran different prompts ({p1:.6g} and {pn:.6g} tokens a request)"
        return Estimate.null(reason), Estimate.null(reason)
    q1, qn = (sum(r.q for r in rs) / len(rs) for rs in (one, many))
    dq = qn - q1
    if dq <= 0:
        reason = f"the N-token runs made no more tokens a request ({qn:.6g}) than the 1-token runs"
        return Estimate.null(reason), Estimate.null(reason)
    e1, en = [r.e for r in one], [r.e for r in many]
    decode = combination([(1 / dq, en), (-1 / dq, e1)])
    prefill = combination([((1 + q1 / dq) / p1, e1), (-q1 / dq / p1, en)])
    return _bounded(prefill, "prefill J/prompt token"), _bounded(decode, "decode J/token")


def fitted(many: Sequence[_Run], phase: str) -> Estimate:
    """The N-token runs' fitted split of ``phase`` (prefill | decode) per token, ± the 95%
    interval of the runs' mean (module docstring)."""
    got = [
        (r.prefill_j, r.prefill_ci95, r.tokens_in)
        if phase == "prefill"
        else (r.decode_j, r.decode_ci95, r.tokens_out)
        for r in many
    ]
    if not got or any(j is None for j, _, _ in got):
        return Estimate.null(f"the N-token runs have no fitted {phase} energy (energy.{phase}_j)")
    pairs = [(j / n, h / n) for j, h, n in got if j is not None and h is not None]
    if len(pairs) < len(got):
        return Estimate.null(
            f"the N-token runs' energy.{phase}_j has no 95% interval "
            f"(energy.{phase}_j_ci95_half_width: none in results written before llem published "
            "it, or the attribution gave none; its worst-case bound is no interval)"
        )
    value = sum(v for v, _ in pairs) / len(pairs)
    half = math.sqrt(sum(h * h for _, h in pairs)) / len(pairs)
    if half > abs(value):
        return Estimate.null(
            f"the fitted {phase} J/token {value:.3g} ±{half:.2g}: "
            "the interval is wider than the figure"
        )
    return Estimate(value, half)


# --------------------------------------------------------------------------- pairing
def _pair_key(runs: Runs, group: Group) -> tuple:
    """What the two lengths must share: every other knob, the model, engine and hardware."""
    row = group.rows[0]
    knobs = [k for k in runs.knobs if k not in TOKEN_KEYS]
    values = [(k, str(runs.frame[k].iloc[row])) for k in knobs]
    same = [(k, _text(runs.frame, row, k)) for k in SAME]
    return (*values, *same, group.hardware)


def _label(runs: Runs, group: Group, hardware_differs: bool) -> str:
    knobs = [k for k in runs.knobs if k not in TOKEN_KEYS]
    parts = [f"{k.rsplit('.', 1)[-1]}={runs.frame[k].iloc[group.rows[0]]}" for k in knobs]
    if hardware_differs and group.hardware is not None:
        parts.append(hardware_label(group.hardware))
    return " ".join(parts) or "all runs"


def _length(runs: Runs, group: Group) -> int | None:
    value = _number(runs.frame, group.rows[0], LENGTH_KEY)
    return None if value is None else int(value)


def phase_comparisons(runs: Runs, include_invalid: bool = False) -> list[PhaseComparison]:
    """Every configuration that ran with 1 new token and with N: the two methods side by side
    (empty where ``decoder.max_new_tokens`` is not swept or no value of it is 1)."""
    if LENGTH_KEY not in runs.knobs:
        return []
    groups = [g for g in configuration_groups(runs) if _length(runs, g) is not None]
    hardware_differs = len({g.hardware for g in groups}) > 1
    by_key: dict[tuple, list[Group]] = {}
    for g in groups:
        by_key.setdefault(_pair_key(runs, g), []).append(g)
    out = []
    for pair in by_key.values():
        base = [g for g in pair if _length(runs, g) == 1]
        if len(base) != 1:
            continue
        one, why_one = _runs_of(runs, base[0], include_invalid)
        for g in sorted(pair, key=lambda g: _length(runs, g) or 0):
            n = _length(runs, g) or 0
            if n <= 1:
                continue
            many, why_many = _runs_of(runs, g, include_invalid)
            out.append(_compare(runs, g, n, one, many, [*why_one, *why_many], hardware_differs))
    return out


def _compare(
    runs: Runs,
    group: Group,
    n: int,
    one: list[_Run],
    many: list[_Run],
    why: list[str],
    hardware_differs: bool,
) -> PhaseComparison:
    if not one or not many:
        reason = f"no energy: {why[0]}" if why else "no run of one of the lengths finished"
        prefill = decode = fit_p = fit_d = Estimate.null(reason)
    else:
        prefill, decode = difference(one, many)
        fit_p, fit_d = fitted(many, "prefill"), fitted(many, "decode")
    return PhaseComparison(
        _label(runs, group, hardware_differs),
        n,
        len(one),
        len(many),
        prefill,
        decode,
        fit_p,
        fit_d,
        _between(one),
        _between(many),
    )


def _between(runs: Sequence[_Run]) -> float | None:
    """The runs' mean share of their window's energy between engine steps (None: none has it)."""
    shares = [r.between_j / r.total_j for r in runs if r.between_j is not None and r.total_j]
    return sum(shares) / len(shares) if shares else None

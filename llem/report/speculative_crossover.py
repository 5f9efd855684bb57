"""A speculative run against its plain twin, and where speculation stops paying: the report's
section over a sweep that crosses ``speculative`` (``none`` and one or more methods) with at most
one load knob (a batch size, ``vllm.max_num_seqs``, a request rate), ``docs/speculative.md``.

At each load value (the sweep's one load where it has no load knob), each method's J per output
token, tokens/s and TPOT p50 against the plain run's (``speculative=none``) at the same load, as
a ratio of the means over repeats with a 95% interval from the two means' own (``r x sqrt((h_a /
a)^2 + (h_b / b)^2)``, the delta method for independent means; a mean without an interval gives
none), beside the method's mean acceptance rate. A ratio whose interval lies below 1 saves
(J/token) or is slower (tokens/s); above 1, the reverse; across 1, within noise. The crossover
is where the verdict turns: the last load where speculation saves energy and the first after it
where it costs. '' where the sweep does not cross ``speculative``.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from llem.report.cells import is_missing
from llem.report.columns import Column, col
from llem.report.labels import format_with_ci
from llem.report.layout import split_columns, table_lines
from llem.report.window import JTOK, TOKS, headline

KNOB = "speculative"
PLAIN = "none"
TPOT = "latency.tpot_ms.p50"
ACCEPTANCE = "speculative.acceptance_rate"


@dataclass(frozen=True)
class Ratio:
    value: float | None  # None: one side has no mean
    half_width: float | None  # None: one side has no interval

    @property
    def low(self) -> float | None:
        return (
            None if self.value is None or self.half_width is None else self.value - self.half_width
        )

    @property
    def high(self) -> float | None:
        return (
            None if self.value is None or self.half_width is None else self.value + self.half_width
        )


@dataclass(frozen=True)
class LoadPoint:
    load: object  # the load knob's value (None: the sweep has no load knob)
    j_per_token: Ratio  # speculative / plain
    tokens_per_s: Ratio
    tpot: Ratio = Ratio(None, None)  # TPOT p50
    acceptance: float | None = None  # the method's mean acceptance rate (None: not said)


@dataclass(frozen=True)
class Crossover:
    method: str
    load_knob: str | None  # None: the sweep crosses speculative alone (one load)
    points: tuple[LoadPoint, ...]  # by load, ascending

    @property
    def verdict(self) -> str:
        return crossover_line(self)


def ratio(a: float, ha: float | None, b: float, hb: float | None) -> Ratio:
    """``a / b`` with the delta-method half-width from the half-widths of ``a`` and ``b``."""
    if any(math.isnan(x) for x in (a, b)) or b == 0:
        return Ratio(None, None)
    r = a / b
    if ha is None or hb is None or math.isnan(ha) or math.isnan(hb) or a == 0:
        return Ratio(r, None)
    return Ratio(r, abs(r) * math.sqrt((ha / a) ** 2 + (hb / b) ** 2))


def side(r: Ratio) -> int | None:
    """-1: the interval lies below 1; +1: above; 0: across 1; None: no interval."""
    if r.low is None or r.high is None:
        return None
    return -1 if r.high < 1 else 1 if r.low > 1 else 0


def crossover_line(c: Crossover) -> str:
    """Where speculation stops saving energy, by J per output token (the speed's turn where
    energy was not measured)."""
    by_energy = [side(p.j_per_token) for p in c.points]
    what, sides, saves = "energy", by_energy, -1
    if all(s is None for s in by_energy):
        what, sides, saves = (
            "speed (J/token unmeasured)",
            [side(p.tokens_per_s) for p in c.points],
            1,
        )
    loads = [p.load for p in c.points]
    name = f"speculative={c.method}"
    where = f"at every {c.load_knob} measured" if c.load_knob else "at the sweep's load"
    if all(s == saves for s in sides):
        return f"{name} pays in {what} {where}"
    if all(s == -saves for s in sides):
        return f"{name} costs {what} {where}"
    if c.load_knob is None and sides == [None]:
        return f"{name}: not judged in {what} {where} (no 95% interval: add repeats)"
    if c.load_knob is None:
        return f"{name}: within noise in {what} {where}"
    pays = [i for i, s in enumerate(sides) if s == saves]
    costs = [i for i, s in enumerate(sides) if s == -saves and pays and i > pays[0]]
    if costs:
        last_pay = max(i for i in pays if i < costs[0])
        return (
            f"{name} stops paying in {what} between {c.load_knob}={loads[last_pay]} (pays) and "
            f"{c.load_knob}={loads[costs[0]]} (costs)"
        )
    unclear = [str(loads[i]) for i, s in enumerate(sides) if s in (0, None)]
    if not unclear:  # it costs at the lighter loads and pays at the heavier ones
        return f"{name}: no crossover from paying to costing in {what} as {c.load_knob} grows"
    return (
        f"{name}: no clear crossover in {what} (within noise at {c.load_knob}={', '.join(unclear)})"
    )


def _floats(summary: pd.DataFrame, name: str) -> list[float]:
    return [math.nan if is_missing(v) else float(v) for v in col(summary, name)]


def crossovers(summary: pd.DataFrame, knobs: Sequence[str]) -> list[Crossover] | str:
    """Each method's ratios against the plain run, by load; or why there are none ('' where
    the sweep does not cross ``speculative`` at all)."""
    if KNOB not in knobs:
        return ""
    others = [k for k in knobs if k != KNOB]
    methods = [str(v) for v in dict.fromkeys(col(summary, KNOB))]
    if PLAIN not in methods or len(others) > 1:
        need = "speculative=none" if PLAIN not in methods else "at most one load knob"
        return f"speculative crossover: not found (it needs {need} in the sweep)"
    load_knob = others[0] if others else None
    names = (headline(summary, JTOK), headline(summary, TOKS), TPOT)
    columns = [(_floats(summary, f"{n}.mean"), _floats(summary, f"{n}.ci95_half")) for n in names]
    accepted = _floats(summary, f"{ACCEPTANCE}.mean")
    at = col(summary, load_knob) if load_knob else [None] * len(accepted)
    pairs = zip(col(summary, KNOB), at, strict=True)
    rows = {(str(method), load): i for i, (method, load) in enumerate(pairs)}
    loads = sorted({load for _, load in rows}, key=_load_order)
    out = []
    for method in (m for m in methods if m != PLAIN):
        points = []
        for load in loads:
            if (method, load) not in rows or (PLAIN, load) not in rows:
                continue
            i, j = rows[(method, load)], rows[(PLAIN, load)]
            jtok, toks, tpot = (ratio(v[i], h[i], v[j], h[j]) for v, h in columns)
            rate = None if math.isnan(accepted[i]) else accepted[i]
            points.append(LoadPoint(load, jtok, toks, tpot, rate))
        out.append(Crossover(method, load_knob, tuple(points)))
    return out


def _load_order(value: object) -> tuple[int, float | str]:
    try:
        return (0, float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return (1, str(value))


def _cell(r: Ratio) -> str:
    if r.value is None:
        return "null"
    return format_with_ci(r.value, r.half_width)


def _rate(acceptance: float | None) -> str:
    return "null" if acceptance is None else f"{acceptance:.2f}"


def render_crossover(summary: pd.DataFrame, knobs: Sequence[str], width: int) -> str:
    """The section: a table per method (ratios by load) and its crossover line."""
    found = crossovers(summary, knobs)
    if isinstance(found, str):
        return found
    parts = []
    for c in found:
        if c.load_knob:
            key = [Column(c.load_knob, [str(p.load) for p in c.points], False)]
            same = f"at the same {c.load_knob}"
        else:
            key = [Column("speculative", [c.method for _ in c.points], False)]
            same = "(its plain twin)"
        rest = [
            Column("J/token ratio", [_cell(p.j_per_token) for p in c.points], True),
            Column("tokens/s ratio", [_cell(p.tokens_per_s) for p in c.points], True),
            Column("TPOT p50 ratio", [_cell(p.tpot) for p in c.points], True),
            Column("acceptance", [_rate(p.acceptance) for p in c.points], True),
        ]
        heading = (
            f"speculative={c.method} against speculative=none {same}: ratio of the means over "
            "repeats ± 95% interval (delta method); J/token below 1 saves energy, tokens/s "
            "above 1 and TPOT below 1 are faster; acceptance: the share of draft tokens the target "
            "kept (the mean over repeats):"
        )
        parts += textwrap.wrap(heading, width=width)
        for block in split_columns(key, rest, width):
            parts += table_lines(block)
        parts += textwrap.wrap(c.verdict, width=width, subsequent_indent="  ")
    return "\n".join(parts)

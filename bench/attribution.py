"""The energy attribution against a planted truth: recovered vs planted J per prefill token, J per
decode token, static power and each request's energy, and their errors, at a few sampling rates.

The power comes from the modelled source (``llem.testing.modelled_power``): a fake GPU whose
power follows planted step costs, read by llem's real measurement session on a virtual clock with
a 100 ms energy-counter refresh. The schedules are synthetic with step durations shaped like a
small model's on a GPU (12 ms fixed, 20 us per prefill token, 0.2 ms per running request, +/- 15 %
jitter): batch 1, a static batch of 32, and open-loop Poisson arrivals under continuous batching.
Verdicts: every recovered figure lies within its stated bound, and the bounds widen as the
timeline coarsens.

    python bench/attribution.py
    python bench/attribution.py --requests 64 --rates 1000 100 10 1
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import dataclass

from _verdict import Check, Target, report

from llem.backends.types import EngineStep
from llem.figures.attribution import Attribution, attribute
from llem.measure.span_energy import span_energies
from llem.testing.modelled_power import Measured, PlantedModel, measure_modelled, simulate
from llem.testing.modelled_power import window_spans as cut_window

MODEL = PlantedModel(a_j=0.004, b_j=0.05, static_w=120.0, idle_w=60.0)
CEILING_W = 700.0


def schedule(kind: str, n: int, seed: int) -> list[EngineStep]:
    rng = random.Random(seed)
    ins = [rng.randint(32, 512) for _ in range(n)]
    outs = [rng.randint(4, 64) for _ in range(n)]
    if kind == "batch 1":
        return simulate([0.0] * n, ins, outs, 1, static=True, seed=seed)
    if kind == "batch 32":
        return simulate([0.0] * n, ins, outs, 32, static=True, seed=seed)
    arrivals, t = [], 0.0
    for _ in range(n):
        t += rng.expovariate(20.0)
        arrivals.append(t)
    return simulate(arrivals, ins, outs, 16, seed=seed)


@dataclass(frozen=True)
class Row:
    kind: str
    hz: float
    median_step_ms: float
    att: Attribution
    worst: float  # the largest |error| / bound over every recovered figure
    request_err_pct: float  # median |error| of a request's energy, % of its truth
    request_bound_pct: float  # median bound of a request's energy, % of its truth


def run(kind: str, steps: list[EngineStep], hz: float) -> Row:
    m: Measured = measure_modelled(steps, MODEL, sample_hz=hz, counter_update_s=0.1)
    cut = cut_window(m)
    edges = [c.start_s for c in cut] + [cut[-1].end_s]
    got = span_energies(m.window, edges, source=m.session.source, ceiling_w=CEILING_W)
    if isinstance(got, str):
        sys.exit(f"error: no span energies: {got}")
    att = attribute(cut, got.energy_j, got.timing_bound_j, got.scale_relative)
    truth = m.power.request_truth_j()
    ratios, errs, bounds = [], [], []
    for name, planted in (("a", MODEL.a_j), ("b", MODEL.b_j), ("p_static", MODEL.static_w)):
        c = att.fit.coefficient(name)
        if c.value is not None and c.bound:
            ratios.append(abs(c.value - planted) / c.bound)
    for rid, r in (att.requests or {}).items():
        ratios.append(abs(r.energy_j - truth[rid]) / r.bound_j if r.bound_j else 0.0)
        errs.append(100 * abs(r.energy_j - truth[rid]) / truth[rid])
        bounds.append(100 * r.bound_j / truth[rid])
    median_step = statistics.median(s.end_s - float(s.start_s or s.end_s) for s in steps)
    return Row(
        kind,
        hz,
        1000 * median_step,
        att,
        max(ratios),
        statistics.median(errs),
        statistics.median(bounds),
    )


def _coef(value: float | None, bound: float | None, planted: float) -> str:
    if value is None:
        return "null"
    err = 100 * (value - planted) / planted
    return f"{value:.4g} ±{bound or 0:.2g} ({err:+.1f}%)"


def table(rows: list[Row]) -> None:
    print(
        f"planted: a = {MODEL.a_j} J/prefill token, b = {MODEL.b_j} J/decode token, "
        f"P_static = {MODEL.static_w} W, idle = {MODEL.idle_w} W; counter refresh 100 ms\n"
    )
    head = (
        f"{'schedule':<9} {'step':>6} {'rate':>6}  {'a (J/prefill tok)':<26} "
        f"{'b (J/decode tok)':<24} {'P_static (W)':<22} {'R2':>6}  "
        f"{'req err':>7} {'req bound':>9} {'err/bound':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        f = r.att.fit
        print(
            f"{r.kind:<9} {r.median_step_ms:>4.1f}ms {r.hz:>4g}Hz  "
            f"{_coef(f.a.value, f.a.bound, MODEL.a_j):<26} "
            f"{_coef(f.b.value, f.b.bound, MODEL.b_j):<24} "
            f"{_coef(f.p_static.value, f.p_static.bound, MODEL.static_w):<22} "
            f"{f.r2 if f.r2 is not None else float('nan'):>6.3f}  "
            f"{r.request_err_pct:>6.1f}% {r.request_bound_pct:>8.0f}% {r.worst:>9.3f}"
        )
    print(
        "\nreq err / req bound: the median over requests of |recovered - planted| and of the "
        "stated bound, % of the planted energy; err/bound: the largest |error| / bound over a, b, "
        "P_static and every request (<= 1: within bound)"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--rates", type=float, nargs="+", default=[1000.0, 100.0, 10.0, 1.0])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rates = sorted(args.rates, reverse=True)
    rows = []
    for kind in ("batch 1", "batch 32", "open"):
        steps = schedule(kind, args.requests, args.seed)
        rows += [run(kind, steps, hz) for hz in rates]
    table(rows)
    targets: list[Target | Check] = [
        Target(
            "largest |error| / bound, every schedule and rate",
            max(r.worst for r in rows),
            "<=",
            1.0,
        )
    ]
    for kind in ("batch 1", "batch 32", "open"):
        mine = [r for r in rows if r.kind == kind]
        widens = all(
            b.request_bound_pct >= a.request_bound_pct for a, b in zip(mine, mine[1:], strict=False)
        )
        shown = " > ".join(f"{r.request_bound_pct:.0f}%" for r in reversed(mine))
        targets.append(
            Check(f"{kind}: median request bound", shown, "widens as the rate drops", widens)
        )
    return 0 if report(targets) else 1


if __name__ == "__main__":
    sys.exit(main())

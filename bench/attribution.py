"""The energy attribution against an independent truth: llem's phase split (prefill, decode,
between steps), fitted J per token and each request's energy, with their bounds, against what
the simulated GPU really drew, at the default sampling rate and a fine one.

The truth harness (``llem.testing.truth``) simulates an engine (continuous batching under a token
budget, chunked prefill, preemption with recompute) on a GPU whose power is not llem's linear
model, read through an NVML-like sensor (readings refreshed every 100 ms, each the mean of only
the first 25 ms of its window as on A100/H100, the energy counter summing them) by llem's real
measurement session on a virtual clock. Truth per phase and per request comes from the physics
(``llem.testing.truth.gpu``); llem's code is not called to make it.

Schedules: ``open loop`` (Poisson arrivals, 512-token budget: steps of 10-17 ms), ``chunked``
(long prompts under a 256-token budget, a KV cache small enough to preempt), and ``linear`` (the
open loop on a GPU that draws llem's model exactly: 4 mJ per prefill token, 50 mJ per decode
token, 120 W static, so the fitted coefficients have a true value). On the non-linear GPU the
coefficients have no true value: they are shown beside the physics' mean marginal cost, without
a verdict, and judged by the phase split and per-request energies they produce.

Per schedule and rate (over ``--seeds`` seeds): each figure's error against truth, its bound,
whether the error is within the bound, and how much wider than the error the bound is.

    python bench/attribution.py                        # 10 Hz and 1 kHz, 3 seeds, part-time sensor
    python bench/attribution.py --rates 10 20 1000 --sampled-fraction 1.0 --seeds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

from _verdict import Check, Target, report

from llem.figures.attribution import Attribution
from llem.runner.attribution import attribute_window
from llem.testing.truth import harness as h
from llem.testing.truth.gpu import Gpu, LinearGpu

LINEAR = LinearGpu()


def attribute_run(run: h.Run) -> Attribution | str:
    """llem's attribution of a simulated run, as the run makes it."""
    w = run.window
    got = attribute_window(
        run.steps, w, run.session.source, w.start_s, w.end_s, ceiling_w=h.POWER_LIMIT_W
    )
    return got if isinstance(got, str) else got[1]


@dataclass(frozen=True)
class Figure:
    name: str
    value: float | None  # None: null
    bound: float | None
    truth: float
    why: str | None = None  # the null reason
    verdict: bool = True  # in the coverage verdict (false: shown only)
    se: float | None = None  # a fitted cost's standard error

    @property
    def error(self) -> float | None:
        return None if self.value is None else self.value - self.truth

    @property
    def covered(self) -> bool | None:
        if self.value is None or self.bound is None:
            return None
        return abs(self.value - self.truth) <= self.bound * (1 + 1e-9) + 1e-12


@dataclass(frozen=True)
class Row:
    schedule: str
    hz: float
    seed: int
    step_ms: float
    figures: list[Figure]
    requests: list[Figure]


def _part(name: str, p: object, truth: float, why: str | None) -> Figure:
    if p is None:
        return Figure(name, None, None, truth, why)
    return Figure(name, p.energy_j, p.bound_j, truth)  # type: ignore[attr-defined]


def figures_of(att: Attribution, run: h.Run, linear: bool) -> tuple[list[Figure], list[Figure]]:
    t = run.truth
    a_true, b_true = (LINEAR.a_j, LINEAR.b_j) if linear else h.marginal_costs(run.trace, Gpu())
    fit, why = att.fit, att.split_null_reason
    out = [
        _part("prefill J", att.prefill, t.prefill_j, why),
        _part("decode J", att.decode, t.decode_j, why),
        _part("between J", att.between, t.between_j, why),
        Figure(
            "J/prefill tok", fit.a.value, fit.a.bound, a_true, fit.a.null_reason, linear, fit.a.se
        ),
        Figure(
            "J/decode tok", fit.b.value, fit.b.bound, b_true, fit.b.null_reason, linear, fit.b.se
        ),
    ]
    reqs = [
        Figure(f"request {rid}", r.energy_j, r.bound_j, t.request_j[rid])
        for rid, r in (att.requests or {}).items()
    ]
    return out, reqs


def run_one(name: str, seed: int, hz: float, sensor: h.Sensor, n: int) -> Row:
    linear = name == "linear"
    schedule = h.chunked(max(n // 3, 8), seed) if name == "chunked" else h.open_loop(n, seed)
    gpu = LINEAR if linear else Gpu()
    trace = h.simulate(schedule, gpu, seed)
    run = h.measure(trace, gpu, sample_hz=hz, sensor=sensor)
    att = attribute_run(run)
    if isinstance(att, str):
        sys.exit(f"error: no attribution: {att}")
    figs, reqs = figures_of(att, run, linear)
    step_ms = 1000 * statistics.median(s.end_s - float(s.start_s or 0) for s in trace.steps)
    return Row(name, hz, seed, step_ms, figs, reqs)


def _pct(x: float | None, truth: float) -> str:
    return "null" if x is None else f"{100 * x / truth:+.1f}%" if truth else f"{x:+.3g}"


def print_rows(rows: list[Row]) -> None:
    head = f"{'schedule':<10} {'rate':>6} {'seed':>4} {'step':>6}  " + "  ".join(
        f"{f.name:>30}" for f in rows[0].figures
    )
    print(head + "   requests: err  bound  in-bound")
    for r in rows:
        cells = []
        for f in r.figures:
            if f.value is None:
                cells.append(f"{'null':>30}")
                continue
            mark = "" if f.covered else " OUT"
            se = "" if f.se is None else f" se {100 * f.se / f.truth:.0f}%"
            cell = _pct(f.error, f.truth) + " ±" + _pct(f.bound, f.truth)[1:] + se + mark
            cells.append(f"{cell:>30}")
        errs = [abs(q.error or 0) / q.truth for q in r.requests] or [float("nan")]
        bounds = [(q.bound or 0) / q.truth for q in r.requests] or [float("nan")]
        inside = sum(1 for q in r.requests if q.covered)
        print(
            f"{r.schedule:<10} {r.hz:>4g}Hz {r.seed:>4} {r.step_ms:>4.1f}ms  "
            + "  ".join(cells)
            + f"   {100 * statistics.median(errs):5.1f}% {100 * statistics.median(bounds):5.0f}%"
            + f"  {inside}/{len(r.requests)}"
        )
    print(
        "\nfigure cells: error against truth ±bound (se: a fitted cost's standard error), % of "
        "truth (OUT: error outside its bound); "
        "J/token on the non-linear GPU: against the physics' mean marginal cost (no verdict); "
        "requests: median |error| and median bound, % of each request's truth, and how many "
        "requests lie within their bound"
    )


def _ratios(figures: list[Figure]) -> str:
    """How much wider than the error the bound is: median and max of bound / |error|."""
    r = [(f.bound or 0) / abs(f.error) for f in figures if f.error and f.covered and f.bound]
    return f"median {statistics.median(r):.3g}, max {max(r):.3g}" if r else "no figure"


def print_widths(rows: list[Row]) -> None:
    print("\nbound / |error| (how much wider the bound is than the error), per figure:")
    names = [f.name for f in rows[0].figures]
    for hz in sorted({r.hz for r in rows}):
        mine = [r for r in rows if r.hz == hz]
        cells = []
        for n in names:
            judged = [f for r in mine for f in r.figures if f.name == n and f.verdict]
            if judged:
                cells.append(f"{n}: {_ratios(judged)}")
        reqs = _ratios([q for r in mine for q in r.requests])
        print(f"  {hz:g} Hz: " + "; ".join(cells) + f"; requests: {reqs}")


def verdicts(rows: list[Row]) -> list[Target | Check]:
    out: list[Target | Check] = []
    for name in dict.fromkeys(r.schedule for r in rows):
        for hz in sorted({r.hz for r in rows}):
            mine = [r for r in rows if r.schedule == name and r.hz == hz]
            judged = [
                f for r in mine for f in r.figures + r.requests if f.verdict and f.value is not None
            ]
            outside = sum(1 for f in judged if not f.covered)
            out.append(
                Target(
                    f"{name} {hz:g} Hz: figures outside their bound (of {len(judged)})",
                    outside,
                    "<=",
                    0,
                )
            )
    default = min(r.hz for r in rows)
    for r in rows:
        if r.schedule != "open loop" or r.hz != default:
            continue
        for f in r.figures[:2]:
            if f.value is None:  # null with the reason meets the target
                out.append(
                    Check(
                        f"{r.schedule} {r.hz:g} Hz seed {r.seed}: {f.name}",
                        f"null ({f.why})",
                        "within 10 % of truth or null",
                        True,
                    )
                )
                continue
            out.append(
                Target(
                    f"{r.schedule} {r.hz:g} Hz seed {r.seed}: {f.name} |error| / truth",
                    abs(f.error or 0) / f.truth,
                    "<=",
                    0.10,
                )
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[10.0, 1000.0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--sampled-fraction", type=float, default=0.25)
    ap.add_argument("--schedules", nargs="+", default=["open loop", "chunked", "linear"])
    args = ap.parse_args()
    sensor = h.Sensor(sampled_fraction=args.sampled_fraction)
    print(
        f"sensor: 100 ms refresh, {args.sampled_fraction:.0%} of each window sampled; "
        f"{args.seeds} seeds\n"
    )
    rows = [
        run_one(name, seed, hz, sensor, args.requests)
        for name in args.schedules
        for hz in args.rates
        for seed in range(1, args.seeds + 1)
    ]
    print_rows(rows)
    print_widths(rows)
    return 0 if report(verdicts(rows)) else 1


if __name__ == "__main__":
    sys.exit(main())

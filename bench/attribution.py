"""The energy attribution against an independent truth: llem's phase split (prefill, decode), each
request's energy and the fitted J per token, with their 95 % intervals and worst-case bounds,
against what the simulated GPU drew, per physics variant, sampling rate and seed.

The truth harness (``llem.testing.truth``) simulates an engine (continuous batching under a token
budget, chunked prefill, preemption with recompute) on a GPU whose power is not llem's model,
read through an NVML-like sensor (readings refreshed every 100 ms, each the mean of only 25 ms of
its window as on A100/H100, the energy counter summing them) by llem's real measurement session
on a virtual clock. The truth per phase and per request comes from the physics
(``llem.testing.truth.gpu``); llem's code is not called to make it. The variants
(``llem.testing.truth.variants``) each add physics the model does not have: ``context`` (costs
that grow with the context), ``lag`` (a sensor 0-200 ms behind the work), ``drift`` (a baseline
drifting by 15 W), ``jitter`` (each reading's sampled 25 ms anywhere in its window) and
``held-out`` (context costs, 128/4096-token prompts under a 512 budget, a 200 ms lag); ``base`` is
the GPU as it is, and ``linear`` a GPU that draws llem's model exactly (4 mJ per prefill token,
50 mJ per decode token, 120 W static), the only one whose J per token has a true value.

Per row: the lag llem estimated (and the timeline's true lag: the sensor's planted lag plus how
late the timeline shows each reading, ``Variant.timeline_lag_s``), each phase's error against truth
with its 95 % half-width and worst-case bound (% of the figure), and over the requests: median and
90th percentile |error|, how many truths lie inside their interval, median half-width. Then per
variant and rate, over the seeds: coverage (truths inside nominal 95 % intervals, of the published
figures; a figure whose interval is wider than itself is null and counted apart), median half-width
of the phase split, median |error| of each phase and the requests' median and 90th percentile
|error|; and the verdicts against the targets: coverage >= 90 % over every variant and seed
together (per variant it is shown), and per variant a phase half-width <= 25 %, each phase within
10 % and requests' median <= 15 % and 90th percentile <= 35 %.

    python bench/attribution.py                                   # 10 Hz and 1 kHz, 3 seeds, 20 s
    python bench/attribution.py --rates 10 --seeds 5 --variants base held-out
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

from _verdict import Target, report

from llem.figures.attribution import Attribution
from llem.runner.attribution import attribute_window
from llem.testing.truth import harness as h
from llem.testing.truth.gpu import LinearGpu
from llem.testing.truth.variants import VARIANTS, Variant

LINEAR = Variant("linear", gpu=LinearGpu())
ALL = {**VARIANTS, "linear": LINEAR}


def attribute_run(run: h.Run) -> Attribution | str:
    """llem's attribution of a simulated run, as the run makes it."""
    w = run.window
    got = attribute_window(
        run.steps, w, run.session.source, w.start_s, w.end_s, ceiling_w=h.POWER_LIMIT_W
    )
    return got if isinstance(got, str) else got[1]


@dataclass(frozen=True)
class Est:
    """A figure against its truth: value, 95 % half-width, worst-case bound."""

    value: float
    half: float | None
    bound: float
    truth: float

    @property
    def error(self) -> float:
        return (self.value - self.truth) / self.truth

    @property
    def published(self) -> bool:
        """Not null: its interval is no wider than itself."""
        return self.half is None or 2 * self.half <= abs(self.value)

    @property
    def covered(self) -> bool:
        return self.half is not None and abs(self.value - self.truth) <= self.half


@dataclass(frozen=True)
class Row:
    variant: str
    hz: float
    seed: int
    lag_s: float
    planted_lag_s: float  # the timeline's true lag (module docstring)
    phases: list[Est]  # prefill, decode
    requests: list[Est]
    costs: list[tuple[str, Est]]  # J per prefill and decode token (linear GPU only)


def run_one(v: Variant, seed: int, hz: float, window_s: float) -> Row:
    run = v.run(v.schedule(seed, window_s), seed, hz)
    att = attribute_run(run)
    if isinstance(att, str) or att.prefill is None or att.decode is None:
        sys.exit(f"error: no attribution of {v.name} seed {seed} at {hz:g} Hz: {att}")
    t = run.truth
    phases = [
        Est(p.energy_j, p.ci95_j, p.bound_j, truth)
        for p, truth in ((att.prefill, t.prefill_j), (att.decode, t.decode_j))
    ]
    reqs = [
        Est(r.energy_j, r.ci95_j, r.bound_j, t.request_j[rid])
        for rid, r in (att.requests or {}).items()
    ]
    costs = []
    if isinstance(v.gpu, LinearGpu):
        for name, truth in (("J/prefill tok", v.gpu.a_j), ("J/decode tok", v.gpu.b_j)):
            c = att.fit.coefficient("a" if "prefill" in name else "b")
            half = att.coefficient_ci95.get("a" if "prefill" in name else "b")
            if c.value is not None:
                costs.append((name, Est(c.value, half, c.bound or 0.0, truth)))
    return Row(v.name, hz, seed, att.lag_s, v.timeline_lag_s(seed, hz), phases, reqs, costs)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _cell(e: Est) -> str:
    if e.half is None:
        return f"{100 * e.error:+.1f}% (no interval)"
    mark = "" if e.covered else " OUT"
    null = "" if e.published else " null"
    return (
        f"{100 * e.error:+.1f}% ±{_pct(e.half / abs(e.value))} "
        f"[bound ±{_pct(e.bound / abs(e.value))}]{mark}{null}"
    )


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(int(q * len(xs)), len(xs) - 1)] if xs else float("nan")


def print_rows(rows: list[Row]) -> None:
    print(
        f"{'variant':<9} {'rate':>6} {'seed':>4} {'lag (true)':>15}  "
        f"{'prefill J':>36}  {'decode J':>36}   requests: |err| p50 p90, in interval, ±p50"
    )
    for r in rows:
        errs = [abs(q.error) for q in r.requests]
        inside = sum(q.covered for q in r.requests)
        halves = [q.half / abs(q.value) for q in r.requests if q.half is not None]
        lag = f"{1000 * r.lag_s:.0f} ({1000 * r.planted_lag_s:.0f}) ms"
        cost = "".join(f"  {n}: {_cell(c)}" for n, c in r.costs)
        print(
            f"{r.variant:<9} {r.hz:>4g}Hz {r.seed:>4} {lag:>15}  "
            + "  ".join(f"{_cell(p):>36}" for p in r.phases)
            + f"   {_pct(statistics.median(errs))} {_pct(_quantile(errs, 0.9))}, "
            f"{inside}/{len(r.requests)}, ±{_pct(statistics.median(halves) if halves else 0)}"
            + cost
        )
    print(
        "\ncells: error against truth ±95 % half-width [worst-case bound], % of the figure; "
        "OUT: the truth outside the interval; null: the interval is wider than the figure, so "
        "the result publishes null ('not resolvable at this sampling rate and window')"
    )


@dataclass(frozen=True)
class Summary:
    name: str
    phase_coverage: float
    phase_n: int
    request_coverage: float
    request_n: int
    nulls: int
    phase_half: float
    prefill_err: float
    decode_err: float
    request_p50: float
    request_p90: float
    cost_coverage: float | None


def _coverage(figs: list[Est]) -> tuple[float, int, int]:
    shown = [f for f in figs if f.published and f.half is not None]
    inside = sum(f.covered for f in shown)
    return (inside / len(shown) if shown else float("nan")), len(shown), len(figs) - len(shown)


def summarise(name: str, rows: list[Row]) -> Summary:
    phases = [p for r in rows for p in r.phases]
    reqs = [q for r in rows for q in r.requests]
    pc, pn, pnull = _coverage(phases)
    rc, rn, rnull = _coverage(reqs)
    costs = [c for r in rows for _, c in r.costs]
    errs = [abs(q.error) for q in reqs]
    return Summary(
        name,
        pc,
        pn,
        rc,
        rn,
        pnull + rnull,
        statistics.median(p.half / abs(p.value) for p in phases if p.half is not None),
        statistics.median(abs(r.phases[0].error) for r in rows),
        statistics.median(abs(r.phases[1].error) for r in rows),
        statistics.median(errs),
        _quantile(errs, 0.9),
        _coverage(costs)[0] if costs else None,
    )


def print_summaries(summaries: list[Summary]) -> None:
    print("\nover the seeds (coverage: truths inside nominal 95 % intervals, published figures):")
    for s in summaries:
        cost = "" if s.cost_coverage is None else f"; J/token {_pct(s.cost_coverage)}"
        print(
            f"  {s.name}: coverage phases {_pct(s.phase_coverage)} of {s.phase_n}, requests "
            f"{_pct(s.request_coverage)} of {s.request_n} ({s.nulls} null){cost}; phase "
            f"half-width median ±{_pct(s.phase_half)}; |error| prefill {_pct(s.prefill_err)}, "
            f"decode {_pct(s.decode_err)}, requests p50 {_pct(s.request_p50)} p90 "
            f"{_pct(s.request_p90)}"
        )


def targets(s: Summary, pooled: bool) -> list[Target]:
    """The verdicts of one summary: coverage over every variant together (``pooled``: the
    coverage is measured across seeds and physics), half-width and accuracy per variant."""
    out = []
    if pooled:
        out += [
            Target(f"{s.name}: phase split in its 95 % interval", s.phase_coverage, ">=", 0.90),
            Target(f"{s.name}: requests in their 95 % interval", s.request_coverage, ">=", 0.90),
        ]
    out += [
        Target(f"{s.name}: phase half-width / figure, median", s.phase_half, "<=", 0.25),
        Target(f"{s.name}: prefill |error| / truth, median", s.prefill_err, "<=", 0.10),
        Target(f"{s.name}: decode |error| / truth, median", s.decode_err, "<=", 0.10),
        Target(f"{s.name}: request |error| / truth, median", s.request_p50, "<=", 0.15),
        Target(f"{s.name}: request |error| / truth, 90th pct", s.request_p90, "<=", 0.35),
    ]
    if s.cost_coverage is not None:
        out.append(Target(f"{s.name}: J/token in its 95 % interval", s.cost_coverage, ">=", 0.90))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rates", type=float, nargs="+", default=[10.0, 1000.0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--window-s", type=float, default=20.0)
    ap.add_argument("--variants", nargs="+", default=list(ALL), choices=list(ALL))
    args = ap.parse_args()
    print(
        f"sensor: 100 ms refresh, 25 % of each window sampled; {args.seeds} seeds; "
        f"{args.window_s:g} s of arrivals\n"
    )
    rows = [
        run_one(ALL[name], seed, hz, args.window_s)
        for name in args.variants
        for hz in args.rates
        for seed in range(1, args.seeds + 1)
    ]
    print_rows(rows)
    summaries: list[tuple[Summary, bool]] = []
    for hz in args.rates:
        for name in args.variants:
            mine = [r for r in rows if r.variant == name and r.hz == hz]
            summaries.append((summarise(f"{name} {hz:g} Hz", mine), False))
        everything = [r for r in rows if r.hz == hz]
        summaries.append((summarise(f"all variants {hz:g} Hz", everything), True))
    print_summaries([s for s, _ in summaries])
    return 0 if report([t for s, pooled in summaries for t in targets(s, pooled)]) else 1


if __name__ == "__main__":
    sys.exit(main())

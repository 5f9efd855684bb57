"""How often does the search report a configuration that is infeasible in truth, with its optimum
on an SLO edge and noisy runs?

Runs the search core (``llem.sweep.search.Search``) on ``PlantedRun.sized(400)`` of
``llem/testing/search_double.py``: minimize ``energy.j_per_output_token`` under
``latency.tpot_ms.p90 <= 50``, the optimum 1.6% under the limit and two cheaper configurations
1.6% and 2.0% over it. Every figure of every run carries a seeded Gaussian of the given relative
noise. For each noise level and seed (0..N-1), one search of ``--budget`` trials (tpe) with
``--confirm`` confirmations of its best; the configuration it reports is judged on the double's
noise-free figures.

Printed per noise level: searches whose reported best is infeasible in truth, whose best is the
true optimum, with no best, and the confirmation trials run (mean). Verdict last (exit status 1
when a target is missed).

    python bench/search_edge.py                      # 20 seeds, noise 1%, 2%, 4%, confirm 2
    python bench/search_edge.py --seeds 10 --noise 0.02 --confirm 0
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

from _verdict import Target, report

from llem.testing.search_double import PlantedRun, search_until


@dataclass(frozen=True)
class Row:
    noise: float
    infeasible: int  # searches whose reported best is infeasible in truth
    optimum: int  # searches whose reported best is the true optimum
    none: int  # searches with no best reported
    confirmations: float  # confirmation trials run, mean over the searches
    seeds: int
    seconds: float


def run_row(noise: float, seeds: int, budget: int, confirm: int) -> Row:
    started = time.perf_counter()
    infeasible = optimum = none = 0
    confirms: list[int] = []
    for seed in range(seeds):
        double = PlantedRun.sized(400, noise=noise, seed=seed)
        found = search_until(double, double.spec(seed, budget=budget), confirm=confirm)
        best = found.record.best_trial()
        confirms.append(len(found.record.confirmations()))
        if best is None:
            none += 1
            continue
        infeasible += not double.feasible(best.knobs)
        optimum += best.knobs == double.optimum()
    return Row(
        noise, infeasible, optimum, none, statistics.mean(confirms), seeds,
        time.perf_counter() - started,
    )  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 per noise level")
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.02, 0.04])
    ap.add_argument("--budget", type=int, default=30, help="search trials per search")
    ap.add_argument("--confirm", type=int, default=2, help="confirmations of the best")
    args = ap.parse_args()
    rows = [run_row(n, args.seeds, args.budget, args.confirm) for n in args.noise]
    print(
        f"PlantedRun.sized(400), optimum on the TPOT edge; budget {args.budget}, "
        f"confirm {args.confirm}, {args.seeds} seeds per row\n"
    )
    head = (
        f"{'noise':>6} {'truly infeasible':>16} {'optimum':>8} {'none':>5} {'confirms':>8} "
        f"{'time':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.noise:>6.0%} {r.infeasible:>13}/{r.seeds:<2} {r.optimum:>5}/{r.seeds:<2} "
            f"{r.none:>5} {r.confirmations:>8.1f} {r.seconds:>5.1f}s"
        )
    print()
    targets = [
        Target(f"noise {r.noise:.0%}: reported best infeasible in truth", r.infeasible / r.seeds,
               "<=", 0.05)
        for r in rows
    ]  # fmt: skip
    return 0 if report(targets) else 1


if __name__ == "__main__":
    raise SystemExit(main())

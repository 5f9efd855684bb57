"""The quality interval's coverage against a planted truth: runs of 16 items (or --items) drawn
from a population whose accuracy is set by hand (``llem.testing.item_population``), each item
answered once, 3 or 10 times (a window stretched over passes), greedy (every pass repeats the
item's answer) or sampled (each item its own chance of a right answer). Prints, per case, how
often Wilson's interval over every answer (llem before result schema 8) and llem's interval over
items hold the truth, the interval's mean width, and a verdict: at least 93% at nominal 95%.

    python bench/quality_interval.py                      # p = 0.6, 16 items, 4,000 runs a case
    python bench/quality_interval.py --p 0.9 --items 50 --runs 2000
"""

from __future__ import annotations

import argparse
import random
import statistics

from _verdict import Target, report

from llem.testing.item_population import Population, coverage, interval_over_items, over_answers

TARGET = 0.93


def _width(pop: Population, n_items: int, passes: int, runs: int) -> float:
    rng = random.Random(1)
    widths = []
    for _ in range(runs):
        got = interval_over_items(pop.draw(rng, n_items, passes))
        if got is not None:
            widths.append(got[1] - got[0])
    return statistics.fmean(widths)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=float, default=0.6, help="the planted accuracy")
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--runs", type=int, default=4000)
    args = ap.parse_args()
    print(f"planted accuracy {args.p}, {args.items} items, {args.runs} runs a case")
    print(f"{'decoding':9} {'passes':>6} {'over answers':>13} {'over items':>11} {'width':>6}")
    targets = []
    for sampled in (False, True):
        pop = Population(p=args.p, sampled=sampled)
        kind = "sampled" if sampled else "greedy"
        for passes in (1, 3, 10):
            old = coverage(over_answers, pop, args.items, passes, args.runs, seed=passes)
            new = coverage(interval_over_items, pop, args.items, passes, args.runs, seed=passes)
            width = _width(pop, args.items, passes, min(args.runs, 1000))
            print(f"{kind:9} {passes:>6} {old:>13.3f} {new:>11.3f} {width:>6.3f}")
            targets.append(
                Target(f"coverage over items, {kind}, {passes} passes", new, ">=", TARGET)
            )
    report(targets)


if __name__ == "__main__":
    main()

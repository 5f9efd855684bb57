"""The draft's energy against the verification's (``speculative.draft_energy_j``,
``verification_energy_j``) against an independent truth, per sensor, sampling rate and seed.

The truth harness's draft phase (``llem.testing.truth.draft``) runs speculative steps on a
simulated GPU: a draft of ``k`` tokens at 260 W for 1 + 3k ms, its verification at 430 W for
16 + 1.2k ms, 0.8 ms at 70 W between steps and 30 ms between requests, each request holding its
own ``k`` (1-8). It is read through the NVML-like sensor (readings refreshed every 100 ms) by
llem's real measurement session on a virtual clock; the truth is each planted power times its
phase's seconds. Sensors: ``part`` (each reading the mean of the first 25 ms of its 100 ms, as
A100/H100), ``jitter`` (those 25 ms anywhere in the window), ``full`` (the whole window) and
``lag`` (``part``, 100 ms behind the work; the spans are not moved to meet it: the run moves
them by the attribution's lag estimate, which needs the engine's steps this harness has not).

Per row: each figure's error against truth and its 95 % half-width (% of the truth). Per sensor
and rate, over the seeds: coverage (truths inside their nominal 95 % interval) and the median
|error| and half-width; the verdicts: coverage >= 90 % over every sensor, rate and seed together,
and per sensor and rate a median |error| within 10 % (draft) and 5 % (verification).

    python bench/draft_energy.py                         # 10 Hz and 1 kHz, 10 seeds
    python bench/draft_energy.py --rates 10 --seeds 4 --sensors part
"""

from __future__ import annotations

import argparse
import statistics
import sys

from _verdict import Target, report

from llem.runner.draft_energy import draft_energy_window
from llem.testing.truth.draft import DraftGpu, measure_draft, speculate
from llem.testing.truth.harness import Sensor, grid_phases

SENSORS = {
    "part": lambda seed: Sensor(seed=seed),
    "jitter": lambda seed: Sensor(jitter_s=0.075, seed=seed),
    "full": lambda seed: Sensor(sampled_fraction=1.0, seed=seed),
    "lag": lambda seed: Sensor(lag_s=0.1, seed=seed),
}


def one(sensor: str, hz: float, seed: int) -> tuple[list[float], list[bool]] | str:
    """(draft, verification) relative errors and whether each truth lies inside its interval."""
    clock_phase, step_phase = grid_phases(seed)  # the sensor's refresh grid at a random phase
    run = measure_draft(
        speculate(seed),
        DraftGpu(),
        sample_hz=hz,
        sensor=SENSORS[sensor](seed),
        lead_s=0.25 + step_phase,
        grid_phase_s=clock_phase,
    )
    w = run.window
    got = draft_energy_window(run.spans, w, run.session.source, w.start_s, w.end_s)
    if isinstance(got, str) or got.draft is None or got.verification is None:
        return got if isinstance(got, str) else str(got.null_reason)
    errors, inside, halves = [], [], []
    for est, truth in ((got.draft, run.draft_j), (got.verification, run.verification_j)):
        errors.append(est.energy_j / truth - 1)
        halves.append(est.ci95_j / truth)
        inside.append(abs(est.energy_j - truth) <= est.ci95_j)
    print(
        f"{sensor:7s}{hz:>7g} Hz  seed {seed}:  draft {100 * errors[0]:+6.1f} % "
        f"(±{100 * halves[0]:4.1f} %)  verification {100 * errors[1]:+6.1f} % "
        f"(±{100 * halves[1]:4.1f} %)  {got.n_intervals} intervals"
    )
    return errors, inside


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", type=float, nargs="+", default=[10.0, 1000.0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--sensors", nargs="+", default=list(SENSORS), choices=list(SENSORS))
    args = p.parse_args(argv)
    targets, inside_all = [], []
    for sensor in args.sensors:
        for hz in args.rates:
            rows = [one(sensor, hz, seed) for seed in range(args.seeds)]
            nulls = [r for r in rows if isinstance(r, str)]
            done = [r for r in rows if not isinstance(r, str)]
            inside = [x for _, i in done for x in i]
            inside_all += inside
            draft = statistics.median(abs(e[0]) for e, _ in done) if done else None
            verify = statistics.median(abs(e[1]) for e, _ in done) if done else None
            print(
                f"{sensor} {hz:g} Hz: {sum(inside)} of {len(inside)} truths inside their 95 % "
                f"interval; median |error| draft {100 * (draft or 0):.1f} %, verification "
                f"{100 * (verify or 0):.1f} %; {len(nulls)} null {nulls[:1]}\n"
            )
            targets += [
                Target(f"{sensor} {hz:g} Hz draft median |error|", draft, "<=", 0.10),
                Target(f"{sensor} {hz:g} Hz verification median |error|", verify, "<=", 0.05),
            ]
    coverage = sum(inside_all) / len(inside_all) if inside_all else None
    targets.insert(0, Target("coverage of the nominal 95 % intervals", coverage, ">=", 0.90))
    return 0 if report(targets) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The attribution's 95 % intervals and accuracy against the truth harness's physics variants
(llem.testing.truth.variants: context costs, a lagging sensor, a drifting baseline, a jittered
sensor, the held-out scenario), whose truth the simulator's physics makes, not llem: the coverage
of the nominal 95 % intervals over seeds and physics, their width, and the errors the issue
targets, on 20 s windows at the default 10 Hz and at 1 kHz."""

from __future__ import annotations

import statistics

import pytest

from attribution.truth_runs import DEFAULT_HZ, FINE_HZ, variant_run
from llem.testing.truth.variants import VARIANTS

SEEDS = (1, 2, 3)  # the intervals' coverage
# The accuracy targets are medians over seeds: over three, one seed decides them (the held-out
# scenario at 10 Hz met its prefill target on seeds 1-3, a median 8.5 %, and missed it on 1-12,
# 10.5 %); over six, a lucky seed moves the median less.
ACCURACY_SEEDS = (1, 2, 3, 4, 5, 6)


def _errors(name: str, hz: float) -> tuple[list[float], list[float], list[float]]:
    """|error| / truth of prefill and decode per seed, and of every request over the seeds."""
    pre, dec, req = [], [], []
    for seed in ACCURACY_SEEDS:
        run, att = variant_run(name, seed, hz)
        assert att.prefill is not None and att.decode is not None and att.requests is not None
        pre.append(abs(att.prefill.energy_j / run.truth.prefill_j - 1))
        dec.append(abs(att.decode.energy_j / run.truth.decode_j - 1))
        req += [abs(r.energy_j / run.truth.request_j[k] - 1) for k, r in att.requests.items()]
    return pre, dec, req


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * len(xs))]


ACCURACY = [
    *((name, DEFAULT_HZ) for name in VARIANTS),
    ("base", FINE_HZ),
    ("held-out", FINE_HZ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "hz"), ACCURACY)
def test_each_variant_meets_the_accuracy_targets(name: str, hz: float) -> None:
    """Prefill and decode within 10 % of the truth (median over seeds); requests' median error at
    most 15 %, 90th percentile at most 35 %; at 1 kHz no worse."""
    pre, dec, req = _errors(name, hz)
    assert statistics.median(pre) <= 0.10, pre
    assert statistics.median(dec) <= 0.10, dec
    assert statistics.median(req) <= 0.15
    assert _p90(req) <= 0.35


@pytest.mark.slow
@pytest.mark.parametrize("hz", [DEFAULT_HZ])
def test_nominal_95_percent_intervals_hold_at_least_90_percent_of_the_truths(hz: float) -> None:
    """Over every variant and seed: the phase split's truths and the requests' truths inside their
    published 95 % intervals at least 90 % of the time; the phase split's median half-width at
    most 25 % of the figure; a figure wider than its interval would be null, and none is."""
    phases = inside = requests = req_inside = 0
    halves = []
    for name in VARIANTS:
        for seed in SEEDS:
            run, att = variant_run(name, seed, hz)
            t = run.truth
            for part, truth in ((att.prefill, t.prefill_j), (att.decode, t.decode_j)):
                assert part is not None and part.ci95_j is not None and part.resolved
                phases += 1
                inside += abs(part.energy_j - truth) <= part.ci95_j
                halves.append(part.ci95_j / part.energy_j)
            assert att.requests is not None
            for rid, r in att.requests.items():
                assert r.ci95_j is not None
                requests += 1
                req_inside += abs(r.energy_j - t.request_j[rid]) <= r.ci95_j
    assert inside / phases >= 0.90, (inside, phases)
    assert req_inside / requests >= 0.90, (req_inside, requests)
    assert statistics.median(halves) <= 0.25


@pytest.mark.slow
def test_a_short_window_publishes_each_phase_within_its_interval_or_null_with_the_reason() -> None:
    """A 2 s window of the base physics at 10 Hz (few intervals): each phase figure either holds
    the truth inside its 95 % interval or its interval is wider than itself (then the result
    says 'not resolvable at this sampling rate and window')."""
    run, att = variant_run("base", 1, DEFAULT_HZ, 2.0)
    for part, truth in ((att.prefill, run.truth.prefill_j), (att.decode, run.truth.decode_j)):
        assert part is not None and part.ci95_j is not None
        assert not part.resolved or abs(part.energy_j - truth) <= part.ci95_j

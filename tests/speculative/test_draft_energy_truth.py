"""The draft's energy against the verification's, on the truth harness's draft phase
(``llem.testing.truth.draft``): drafts and verifications of planted powers and lengths, ``k``
varying between requests, read through the NVML-like sensor (100 ms refresh, 25 ms of each
100 ms seen) by llem's real measurement session at 10 Hz and at 1 kHz; the truth is the planted
power times each phase's seconds, never llem's arithmetic."""

from __future__ import annotations

import statistics
from functools import cache

import pytest

from llem.figures.draft_energy import DraftEnergy
from llem.runner.draft_energy import draft_energy_window
from llem.testing.truth.draft import DraftGpu, DraftRun, measure_draft, speculate
from llem.testing.truth.harness import Sensor, grid_phases

SEEDS = range(6)
RATES = (10.0, 1000.0)


@cache
def _measured(seed: int, hz: float, constant: bool = False) -> tuple[DraftRun, DraftEnergy | str]:
    gpu = DraftGpu(request_gap_s=0.0008) if constant else DraftGpu()
    trace = speculate(seed, k_choices=(4,)) if constant else speculate(seed)
    clock_phase, step_phase = grid_phases(seed)
    run = measure_draft(
        trace,
        gpu,
        sample_hz=hz,
        sensor=Sensor(seed=seed),
        lead_s=0.25 + step_phase,
        grid_phase_s=clock_phase,
    )
    w = run.window
    return run, draft_energy_window(run.spans, w, run.session.source, w.start_s, w.end_s)


def _errors(hz: float) -> tuple[list[float], list[float], int]:
    """Each seed's relative error of the draft's and the verification's energy, and how many
    of the 2 x seeds truths lie inside their 95 % intervals."""
    draft, verify, inside = [], [], 0
    for seed in SEEDS:
        run, got = _measured(seed, hz)
        assert not isinstance(got, str) and got.null_reason is None, got
        assert got.draft is not None and got.verification is not None
        draft.append(got.draft.energy_j / run.draft_j - 1)
        verify.append(got.verification.energy_j / run.verification_j - 1)
        inside += abs(got.draft.energy_j - run.draft_j) <= got.draft.ci95_j
        inside += abs(got.verification.energy_j - run.verification_j) <= got.verification.ci95_j
    return draft, verify, inside


@pytest.mark.parametrize("hz", RATES)
def test_the_estimates_are_near_the_planted_truth(hz: float) -> None:
    draft, verify, _ = _errors(hz)
    assert statistics.median(abs(e) for e in draft) < 0.10, draft
    assert max(abs(e) for e in draft) < 0.25, draft
    assert statistics.median(abs(e) for e in verify) < 0.05, verify
    assert max(abs(e) for e in verify) < 0.10, verify


def test_the_nominal_95_intervals_hold_the_truth_at_least_90_percent_of_the_time() -> None:
    inside = sum(_errors(hz)[2] for hz in RATES)
    assert inside >= 0.9 * 2 * len(SEEDS) * len(RATES)


@pytest.mark.parametrize("hz", RATES)
def test_the_intervals_say_something(hz: float) -> None:
    """An interval that admits anything would cover the truth trivially: each is narrower than
    its figure (the figure is published), the verification's well within a fifth of it."""
    for seed in SEEDS:
        run, got = _measured(seed, hz)
        assert not isinstance(got, str) and got.draft and got.verification
        assert 2 * got.draft.ci95_j <= got.draft.energy_j
        assert got.verification.ci95_j <= 0.2 * got.verification.energy_j


def test_the_window_seconds_are_the_recorded_ones() -> None:
    run, got = _measured(0, 10.0)
    assert not isinstance(got, str)
    assert got.draft_s == pytest.approx(sum(b - a for a, b in run.spans.draft))
    assert got.verification_s == pytest.approx(sum(b - a for a, b in run.spans.verification))
    # the counter's window energy: the part-time sensor's readings, within a few % of the truth
    assert got.window_j == pytest.approx(run.window_j, rel=0.05)


@pytest.mark.parametrize("hz", RATES)
def test_a_constant_mix_is_null_with_the_reason(hz: float) -> None:
    _, got = _measured(1, hz, constant=True)
    assert not isinstance(got, str)
    assert got.draft is None and got.verification is None
    assert got.null_reason is not None
    assert got.null_reason.startswith("not separable: every one of the window's")

"""The sensor's lag behind the steps, estimated from the window (llem.runner.lag), on the truth
harness whose sensor lags by a planted amount (llem.testing.truth: the lag is the sensor's, the
truth the physics')."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from attribution.truth_runs import attribute_run
from llem.measure.span_energy import SpanEnergies, span_energies
from llem.runner.attribution import attribute_window
from llem.runner.lag import estimate_lag, lag_range, shifted
from llem.testing.truth.harness import POWER_LIMIT_W
from llem.testing.truth.variants import Variant
from llem.vocabulary.workload import EngineStep


@pytest.mark.parametrize("planted_s", [0.0, 0.15])
def test_the_lag_is_estimated_from_the_window_within_a_grid_step(planted_s: float) -> None:
    """A 3 s window at 10 Hz: the estimate lies within 40 ms of the timeline's lag (the
    sensor's planted lag and how late the sampler reads each reading, ``timeline_lag_s``), and
    the range the window cannot tell from it reaches within half a grid step of that lag. The
    timeline runs a straight line between readings 100 ms apart, so where its energy lies is
    known to the grid step and a half, not to the grid step (on 20 s windows over seeds 1-8,
    the estimate was 2-29 ms early)."""
    v = Variant("planted", lag_s=(planted_s, planted_s))
    run = v.run(v.schedule(2, window_s=3.0), 2, sample_hz=10.0)
    w = run.window

    def measure(at: Sequence[float]) -> SpanEnergies | str:
        return span_energies(w, at, source=run.session.source, ceiling_w=POWER_LIMIT_W)

    lag = estimate_lag(run.steps, w.start_s, w.end_s, measure)
    behind = v.timeline_lag_s(2)
    assert lag.lag_s == pytest.approx(behind, abs=0.04)
    assert lag.low_s - 0.0125 <= behind <= lag.high_s + 0.0125
    assert lag.null_reason is None


@pytest.mark.slow
def test_the_attribution_moves_the_steps_by_the_lag_it_estimates() -> None:
    """A sensor 150 ms behind the work on a 20 s window at 10 Hz: read as if it had no lag,
    prefill energy comes out 18 % low (how far depends on where the steps fall in the sensor's
    refresh windows: 37 % at another phase); with the lag estimated and the steps moved by it,
    within 15 %, and its 95 % interval is no longer the width of the whole miss. How often the
    intervals hold the truth is measured over seeds and variants (test_truth_variants)."""
    v = Variant("planted", lag_s=(0.15, 0.15))
    run = v.run(v.schedule(1), 1, sample_hz=10.0)
    w, truth = run.window, run.truth.prefill_j
    got = attribute_window(
        run.steps, w, run.session.source, w.start_s, w.end_s, ceiling_w=POWER_LIMIT_W, lag_s=0.0
    )
    assert not isinstance(got, str) and got[1].prefill is not None
    assert got[1].prefill.energy_j / truth - 1 < -0.15
    att = attribute_run(run)
    assert att.lag_s == pytest.approx(v.timeline_lag_s(1), abs=0.04)
    assert att.prefill is not None and att.prefill.ci95_j is not None
    assert abs(att.prefill.energy_j / truth - 1) <= 0.15
    assert att.prefill.ci95_j <= 0.3 * truth


def test_a_step_moved_past_the_windows_end_ends_there() -> None:
    steps = [EngineStep(1.0, 1, 4, 0, 0.9), EngineStep(1.98, 1, 0, 1, 1.95)]
    moved = shifted(steps, 0.05, 2.0)
    assert [(s.start_s, s.end_s) for s in moved] == [
        pytest.approx((0.95, 1.05)),
        pytest.approx((2.0, 2.0)),
    ]
    assert shifted(steps, 0.0, 2.0) == steps


def test_the_figures_interval_carries_how_far_they_move_across_the_lags_range() -> None:
    """The attribution at another lag the window cannot tell apart moves prefill by 3 J: its
    half-width of 4 J becomes 5 J (in quadrature); a request it moves by 1.2 J, 0.5 J wide,
    becomes 1.3 J wide; one it does not move keeps its own."""
    from dataclasses import replace

    from attribution.test_attribution import _energies, _mixed_schedule
    from llem.figures.attribution import attribute, spans
    from llem.runner.lag import with_lag_spread

    cut = spans(_mixed_schedule(), 0.9, 1.3)
    att = attribute(cut, _energies(cut), [0.0] * len(cut))
    assert att.prefill is not None and att.requests is not None
    att = replace(att, prefill=replace(att.prefill, ci95_j=4.0))
    r1 = replace(att.requests[1], ci95_j=0.5)
    att = replace(att, requests={**att.requests, 1: r1})
    moved = {**att.requests, 1: replace(r1, energy_j=r1.energy_j - 1.2)}
    other = replace(
        att,
        prefill=replace(att.prefill, energy_j=att.prefill.energy_j + 3.0),
        requests=moved,
    )
    got = with_lag_spread(att, [other])
    assert got.prefill is not None and got.prefill.ci95_j == pytest.approx(5.0)
    assert got.requests is not None
    assert got.requests[1].ci95_j == pytest.approx(1.3)
    assert got.requests[2].ci95_j == pytest.approx(att.requests[2].ci95_j)


def test_the_lags_range_holds_every_lag_that_fits_about_as_well() -> None:
    """Over 100 intervals the profile likelihood's 95 % admits a residual variance up to
    exp(3.84 / 100) = 1.039 x the least: 25 and 100 ms (1.02 and 1.03 x) are in the range, 0 and
    125 ms (1.05 x) not; a sharp minimum leaves half a grid step either side."""
    fits = {0.0: (1.05, 100), 0.025: (1.02, 100), 0.05: (1.0, 100), 0.075: (1.01, 100)}
    fits |= {0.1: (1.03, 100), 0.125: (1.05, 100)}
    assert lag_range(fits, 0.055) == pytest.approx((0.025, 0.1))
    sharp = {0.05: (2.0, 100), 0.075: (1.0, 100), 0.1: (2.0, 100)}
    assert lag_range(sharp, 0.075) == pytest.approx((0.0625, 0.0875))

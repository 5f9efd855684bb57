"""Send times: drawn from the seed before the window, at the configured rate and burstiness."""

from __future__ import annotations

import math
import statistics

import pytest

from llem.backends.traffic.schedule import build_schedule
from llem.config.traffic import TrafficConfig, TrafficKind
from llem.vocabulary.workload import Prompt

PROMPTS = [Prompt(text=f"prompt {i}") for i in range(5)]
N = 4000


def _traffic(kind: str, **kw) -> TrafficConfig:
    return TrafficConfig(kind=TrafficKind(kind), **kw)


def _gaps(traffic: TrafficConfig) -> list[float]:
    times = [r.scheduled_s for r in build_schedule(traffic, PROMPTS)]
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def _cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values)


def test_offline_sends_one_request_per_prompt_at_zero():
    schedule = build_schedule(_traffic("offline"), PROMPTS)
    assert [r.scheduled_s for r in schedule] == [0.0] * 5
    assert [r.request_id for r in schedule] == [0, 1, 2, 3, 4]
    assert [r.prompt for r in schedule] == PROMPTS


def test_more_requests_than_prompts_cycle_through_them():
    schedule = build_schedule(_traffic("offline", n_requests=12), PROMPTS)
    assert [r.prompt_index for r in schedule] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]
    assert all(r.prompt == PROMPTS[r.prompt_index] for r in schedule)
    assert len(build_schedule(_traffic("offline", n_requests=2), PROMPTS)) == 2


def test_closed_loop_requests_are_unscheduled():
    schedule = build_schedule(_traffic("concurrency", max_concurrency=2, n_requests=7), PROMPTS)
    assert len(schedule) == 7 and all(r.scheduled_s is None for r in schedule)


@pytest.mark.parametrize("kind", ["poisson", "gamma", "constant"])
def test_open_loop_starts_at_zero_and_never_goes_back(kind):
    schedule = build_schedule(_traffic(kind, rate_per_s=10, burstiness=0.5, n_requests=50), PROMPTS)
    times = [r.scheduled_s for r in schedule]
    assert times[0] == 0.0
    assert all(b >= a for a, b in zip(times, times[1:], strict=False))


@pytest.mark.parametrize("kind", ["poisson", "gamma"])
def test_a_seed_gives_the_same_times_and_another_seed_other_times(kind):
    t = _traffic(kind, rate_per_s=8, burstiness=0.5, n_requests=100, seed=3)
    again = _traffic(kind, rate_per_s=8, burstiness=0.5, n_requests=100, seed=3)
    other = _traffic(kind, rate_per_s=8, burstiness=0.5, n_requests=100, seed=4)
    assert build_schedule(t, PROMPTS) == build_schedule(again, PROMPTS)
    assert build_schedule(t, PROMPTS) != build_schedule(other, PROMPTS)


def test_poisson_gaps_have_the_rate_and_a_cv_of_one():
    gaps = _gaps(_traffic("poisson", rate_per_s=20, n_requests=N))
    assert 1 / statistics.fmean(gaps) == pytest.approx(20, rel=0.05)
    assert _cv(gaps) == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_rate_and_a_cv_of_one_over_root_burstiness(burstiness):
    gaps = _gaps(_traffic("gamma", rate_per_s=5, burstiness=burstiness, n_requests=N, seed=1))
    assert 1 / statistics.fmean(gaps) == pytest.approx(5, rel=0.08)
    assert _cv(gaps) == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_constant_gaps_are_exactly_one_over_the_rate():
    schedule = build_schedule(_traffic("constant", rate_per_s=4, n_requests=9), PROMPTS)
    assert [r.scheduled_s for r in schedule] == pytest.approx([i / 4 for i in range(9)])


def test_an_empty_prompt_set():
    assert build_schedule(_traffic("offline"), []) == []
    with pytest.raises(ValueError, match="prompt"):
        build_schedule(_traffic("poisson", rate_per_s=1, n_requests=3), [])

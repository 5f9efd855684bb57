"""traffic.duration_s: an open-loop workload sized by how long it sends requests,
ceil(rate x duration) of them, so that every rate of a sweep spans the same time."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llem.app.entrypoint import main
from llem.backends.traffic.schedule import build_schedule
from llem.config.traffic import TrafficConfig, TrafficKind, request_count
from llem.vocabulary.workload import Prompt

PROMPTS = [Prompt(text="x")] * 4


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))


def poisson(rate: float, **knobs: object) -> TrafficConfig:
    return TrafficConfig(kind=TrafficKind.poisson, rate_per_s=rate, **knobs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rate", "duration", "n"), [(2.0, 60.0, 120), (32.0, 60.0, 1920), (8.0, 2.5, 20), (3.0, 0.5, 2)]
)
def test_the_request_count_is_the_rate_times_the_duration_rounded_up(
    rate: float, duration: float, n: int
) -> None:
    traffic = poisson(rate, duration_s=duration)
    assert request_count(traffic, 4) == n
    schedule = build_schedule(traffic, PROMPTS)
    assert len(schedule) == n
    assert [r.prompt_index for r in schedule[:6]] == [0, 1, 2, 3, 0, 1][: min(n, 6)]


def test_without_a_duration_the_count_is_as_before() -> None:
    assert request_count(poisson(2.0), 4) == 4  # one per prompt
    assert request_count(poisson(2.0, n_requests=9), 4) == 9
    offline = TrafficConfig(kind=TrafficKind.offline)
    assert request_count(offline, 4) == 4


SERVE = ["pytorch.batching=continuous"]


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["traffic=poisson", "traffic.rate_per_s=8", "traffic.duration_s=30",
             "traffic.n_requests=100", *SERVE],
            "traffic.duration_s=30.0 and traffic.n_requests=100 both size the workload (set one; "
            "the other null: traffic.n_requests=null or traffic.duration_s=null)",
        ),
        (
            ["traffic.duration_s=30"],
            "traffic.duration_s=30.0 applies to open-loop traffic (poisson, gamma or constant) "
            "only (it is traffic=offline; leave it unset)",
        ),
        (
            ["traffic=poisson", "traffic.rate_per_s=2", "traffic.duration_s=5",
             "traffic.warmup_requests=5", "traffic.cooldown_requests=5", *SERVE],
            "traffic.warmup_requests=5 and traffic.cooldown_requests=5 leave no steady state of "
            "10 requests (traffic.duration_s) (their sum must be below it)",
        ),
        (
            ["traffic=poisson", "traffic.rate_per_s=2", "traffic.duration_s=0", *SERVE],
            "traffic.duration_s=0.0 is out of range (allowed: > 0)",
        ),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_a_bad_duration_is_one_line_and_exit_2(
    overrides: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*overrides, f"hydra.run.dir={tmp_path}", "dry_run=true"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [f"error: {line}"]

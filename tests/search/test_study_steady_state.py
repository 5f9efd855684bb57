"""Issue 28 item 6: every point of every shipped study can reach its own minimum steady state.

Each study's grid (``hydra.sweeper.params``: every choice; an interval's two ends; one repeat) is
composed with Hydra, point by point. For open-loop traffic, llem's own steady-state rule
(``llem.figures.steady_state``: from the instant ``warmup_requests`` requests have finished to the
arrival of the first of the last ``cooldown_requests``) is applied to the point's schedule as llem
draws it (``build_schedule``), for the study's traffic seed and the next ones (a search's
confirmations draw those): the window lasts at least

    arrival[n - cooldown] - (arrival[warmup - 1] + the longest latency that meets the SLOs)

where the first requests meet the SLOs (their latency is then at most slo.e2e_ms, or slo.ttft_ms +
slo.tpot_ms x (max_new_tokens - 1)). That must reach the point's measurement.min_steady_state_s.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from llem.backends.traffic.schedule import build_schedule
from llem.config.traffic import TrafficConfig, edge_requests, is_open_loop, request_count
from llem.hydra.overrides import parse_grid
from llem.sweep.search_space import Choices, make_space
from llem.vocabulary.workload import Prompt

SHIPPED = sorted(p.name[:-5] for p in resources.files("llem.conf").joinpath("experiment").iterdir())
SEEDS = 10  # the study's traffic seed and the next 9: a confirmation's fresh seed among them


@pytest.fixture(autouse=True)
def _registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llem.config.store import register_configs

    monkeypatch.chdir(tmp_path)
    register_configs()


def compose(overrides: list[str]) -> Any:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module("llem.conf", version_base="1.3"):
        return hydra_compose("config", overrides=overrides, return_hydra_config=True)


@functools.cache
def points(study: str) -> list[tuple[list[str], Any]]:
    """Every point of ``study``'s grid: (its overrides, its composed config)."""
    return list(_points(study))


def _points(study: str) -> Iterator[tuple[list[str], Any]]:
    base = [f"+experiment={study}"]
    params = compose(base).hydra.sweeper.params or {}
    grid = [f"{k}={v}" for k, v in params.items() if k != "repeat"]
    space = make_space(parse_grid(grid))
    values = [
        [f"{d.key}={v}" for v in (d.values if isinstance(d, Choices) else (d.low, d.high))]
        for d in space.dims
    ]
    for combo in itertools.product(*values):
        overrides = [*base, *space.fixed, *combo]
        yield overrides, compose(overrides)


def slo_latency_s(cfg: Any) -> float:
    """The longest latency of a request that meets the point's SLOs (0 without SLOs)."""
    slo = cfg.slo
    if slo.e2e_ms is not None:
        return float(slo.e2e_ms) / 1000
    if slo.ttft_ms is None or slo.tpot_ms is None:
        return 0.0
    return (slo.ttft_ms + slo.tpot_ms * (cfg.decoder.max_new_tokens - 1)) / 1000


def steady_s(traffic: TrafficConfig, n_prompts: int, latency_s: float) -> float:
    """The open-loop steady state's length by llem's rule, the first requests at ``latency_s``."""
    prompts = [Prompt(text="x")] * n_prompts
    arrivals = [r.scheduled_s or 0.0 for r in build_schedule(traffic, prompts)]
    n = len(arrivals)
    warmup, cooldown = edge_requests(traffic, n)
    start = arrivals[warmup - 1] + latency_s if warmup else 0.0
    return arrivals[n - cooldown] - start if cooldown else arrivals[-1] - start


@pytest.mark.parametrize("study", SHIPPED)
@pytest.mark.slow
def test_every_open_loop_point_can_reach_its_minimum_steady_state(study: str) -> None:
    short = []
    for overrides, cfg in points(study):
        traffic: TrafficConfig = OmegaConf.to_object(cfg.traffic)  # type: ignore[assignment]
        if not is_open_loop(traffic):
            continue
        need = float(cfg.measurement.min_steady_state_s)
        for seed in range(traffic.seed, traffic.seed + SEEDS):
            traffic.seed = seed
            got = steady_s(traffic, cfg.dataset.n_prompts, slo_latency_s(cfg))
            if got < need:
                short.append(f"{' '.join(overrides[1:])} seed {seed}: {got:.1f} s < {need:g} s")
    assert not short, f"{study}: " + "; ".join(short[:5])


@pytest.mark.parametrize("study", SHIPPED)
@pytest.mark.slow
def test_each_open_loop_request_has_its_own_prompt(study: str) -> None:
    """More requests than prompts would send prompts again, which a prefix cache serves for
    less: a rate's energy per token would depend on how often its prompts repeat."""
    for overrides, cfg in points(study):
        traffic: TrafficConfig = OmegaConf.to_object(cfg.traffic)  # type: ignore[assignment]
        if is_open_loop(traffic):
            n = request_count(traffic, cfg.dataset.n_prompts)
            assert n <= cfg.dataset.n_prompts, f"{study} {overrides[1:]}: {n} requests"

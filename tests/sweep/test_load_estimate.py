"""The plan's estimate of its loading time: each load of the run order counts the median of its
load key's times measured on this host before (planted in a temporary LLEM_CACHE_DIR); a load
never measured here is unknown, never 0."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llem.app.entrypoint import main
from llem.backends import create_backend
from llem.config.schema import SweepOrder
from llem.runner import prepare
from llem.runner.load_times import record_load, this_host_load_times
from llem.sweep.plan import Plan, Point
from llem.sweep.run_order import order_points
from llem.testing.cli import compose_tiny

from .conftest import FAST, NO_REPORT


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "planted-cache"))
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() rewrites sys.argv


def plan_of(keys: list[str], launches: bool = False) -> Plan:
    pts = [
        Point(index=i, overrides=[f"x={i}"], load_key=k, config_hash=f"h{i}", launches=launches)
        for i, k in enumerate(keys)
    ]
    plan = Plan(pts, SweepOrder.grouped, 0, order_points(pts, SweepOrder.grouped, 0))
    plan.load_times = this_host_load_times()
    return plan


def plant(key: str, *seconds: float) -> None:
    for s in seconds:
        record_load(key, s)


def test_each_load_counts_its_keys_median_and_a_key_never_measured_is_unknown() -> None:
    plant("a", 10.0, 40.0, 30.0)  # median 30
    plant("b", 70.0)
    record_load("c", 1000.0, host="another-machine")  # says nothing about this one
    plan = plan_of(["a", "a", "b", "c"])
    assert plan.short(reuse=True).endswith(
        "· 3 model load(s), about 1m40s of loading for the 2 measured on this host before; "
        "1 not measured here yet (unknown)"
    )
    # without reuse every point loads: a twice
    assert plan.short(reuse=False).endswith(
        "· 4 model load(s) (reuse off), about 2m10s of loading for the 3 measured on this host "
        "before; 1 not measured here yet (unknown)"
    )


def test_when_every_load_was_measured_the_estimate_is_their_sum() -> None:
    plant("a", 20.0, 26.0)  # median 23
    plant("b", 3600.0)
    assert (
        plan_of(["a", "b"])
        .short(reuse=True)
        .endswith(
            "· 2 model load(s), about 1h00m23s of loading (the median of this host's earlier loads)"
        )
    )


def test_nothing_measured_adds_nothing_to_the_line() -> None:
    plant("elsewhere", 5.0)
    assert plan_of(["a", "b"]).short(reuse=True).endswith("· 2 model load(s)")


def test_a_launched_server_is_loading_or_launch_to_ready() -> None:
    plant("server", 0.25)
    assert (
        plan_of(["server"], launches=True)
        .short(reuse=True)
        .endswith(
            "· 1 model load(s), under 1s of loading or server launch to ready "
            "(the median of this host's earlier loads)"
        )
    )


def _load_key(tiny: list[str], *overrides: str) -> str:
    exp = prepare(compose_tiny(Path(tiny[1].split("=", 1)[1]), *overrides)).exp
    return create_backend(exp).load_key("cpu")


@pytest.mark.slow
def test_a_dry_run_prints_the_estimate_of_this_hosts_loads(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    plant(_load_key(tiny, "model.dtype=float32"), 12.0)
    plant(_load_key(tiny, "+backend=server", "server.launch=vllm", "model.dtype=float32"), 50.0)
    args = [*tiny, *FAST, NO_REPORT, "device=cpu", "dry_run=true", "model.dtype=float32,bfloat16"]
    code = main(["--multirun", *args, f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        "2 model load(s), about 12s of loading for the 1 measured on this host before; "
        "1 not measured here yet (unknown)"
    ) in out
    args = [*args, "+backend=server", "server.launch=vllm"]
    main(["--multirun", *args, f"hydra.sweep.dir={tmp_path / 'server'}"])
    out = capsys.readouterr().out
    assert "about 50s of loading or server launch to ready for the 1 measured" in out

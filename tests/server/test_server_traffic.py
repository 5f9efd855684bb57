"""Every traffic kind through ``+backend=server``, against the fake OpenAI-compatible server: each
request is sent once, its counts are the planted usage, open-loop requests carry their scheduled
send time and closed-loop ones none, and the closed loop never has more requests in flight than
``traffic.max_concurrency``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llem.testing.cli import run_tiny
from tests.server.fake_openai import Plan
from tests.server.fake_thread import fake_in_thread

pytestmark = pytest.mark.slow

N = 6
PLANTED = {"prompt_tokens": 5, "completion_tokens": 3}
KINDS = {
    "offline": (),
    "poisson": ("traffic.rate_per_s=50", "traffic.seed=1"),
    "gamma": ("traffic.rate_per_s=50", "traffic.burstiness=0.5", "traffic.seed=1"),
    "constant": ("traffic.rate_per_s=50",),
    "concurrency": ("traffic.max_concurrency=2",),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_traffic_kind_is_served_through_the_server(
    kind: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    chunks = [(0.02, "a", None), (0.02, "b", None)]  # 40 ms a request: the loop overlaps them
    plan = Plan(chunks=chunks, usage=dict(PLANTED))
    with fake_in_thread(plan) as url:
        result = run_tiny(
            tiny_model_dir,
            tmp_path / "run",
            "+backend=server",
            f"server.url={url}",
            "server.model=fake-model",
            f"traffic={kind}",
            *KINDS[kind],
            f"traffic.n_requests={N}",
            "measurement.warmup=0",
        )
    assert result["status"] == "ok", result.get("error")
    assert result["traffic"]["kind"] == kind and len(plan.seen) == N
    assert result["workload"]["output_tokens"] == N * PLANTED["completion_tokens"]
    rows = [json.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == N and all(r["output_tokens"] == 3 for r in rows)
    if kind == "concurrency":
        assert all(r["scheduled_s"] is None for r in rows)
        assert result["concurrency"]["max"] <= 2
        assert result["null_reasons"]["traffic.pacing_lateness_ms"].startswith("closed-loop")
    else:
        assert all(r["scheduled_s"] is not None for r in rows)
        assert result["traffic"]["pacing_lateness_ms"] is not None
    if kind in ("poisson", "gamma", "constant"):
        scheduled = sorted(r["scheduled_s"] for r in rows)
        assert scheduled[-1] > scheduled[0]  # paced over time, not a burst

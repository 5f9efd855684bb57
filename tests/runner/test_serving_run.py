"""The run layer's serving path end to end: a fake backend whose ``serve`` runs the real pacing
driver (``llem.backends.traffic.drive``) over a scripted engine with planted timelines, measured
with a replayed power trace; and an offline tiny-model run, whose batches get the same sections.

Until the traffic configuration lands, the traffic and SLO sections are attached to the config
object with the field names of the shared design (``traffic.kind``, ``slo.tpot_ms``...); once it
is there the same workload is composed from overrides.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from inspect import signature
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import llem.runner.runner as runner_module
import llem.runner.serving as serving_module
from llem.backends.traffic.driver import drive
from llem.config.validate import to_experiment
from llem.figures.steady_state import STATIC_REASON
from llem.result import read_requests, read_steps
from llem.runner import Runner
from llem.testing.cli import compose_tiny
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import (
    EngineStep,
    Prompt,
    RequestTimeline,
    ScheduledRequest,
    ServeOutput,
)

N = 20
GAP_S = 0.01  # constant rate: 100 requests/s
POWER_W = 200.0


def _plant(request: ScheduledRequest, arrival: float) -> RequestTimeline:
    """The scripted engine: odd requests are sent 0.5 ms late and stream more slowly. Chunks at
    arrival + 4 ms (1 token), + spacing (1 token), + 2 x spacing (2 tokens)."""
    odd = request.request_id % 2
    spacing = 0.0025 if odd else 0.002
    first = arrival + 0.004
    return RequestTimeline(
        request_id=request.request_id,
        prompt_index=request.prompt_index,
        arrival_s=arrival,
        scheduled_s=arrival,
        sent_s=arrival + 0.0005 * odd,
        chunk_times_s=[first, first + spacing, first + 2 * spacing],
        chunk_tokens=[1, 1, 2],
        input_tokens=10,
    )


class FakeServingBackend:
    """Serves through the real driver on a virtual clock that starts at the real origin; then
    waits (for real) until every planted instant has passed, so the window covers them."""

    name = "pytorch"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.served: ServeOutput | None = None

    @property
    def config(self) -> Any:
        return SimpleNamespace(batch_size=8)

    def load_key(self, device: str) -> str:
        return "fake"

    def torch_device_indices(self) -> list[int]:
        return []

    def measures_named_gpus(self, measurement: object) -> bool:
        return False

    def energy_refusal(self, measurement: object) -> str | None:
        return None

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        return [list(prompts)]

    def batch_size(self, loaded: LoadedModel) -> int:
        return 8

    def load(self, device: str) -> LoadedModel:
        return LoadedModel(None, self.tokenizer, "cpu", "float32", {}, "fake", 0.0, "fake", None)

    def warm_up(self, loaded: LoadedModel, batches: Any, n_batches: int) -> None:
        pass

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> Any:
        raise AssertionError("a serving run never calls generate")

    def serve(
        self, loaded: LoadedModel, requests: Sequence[ScheduledRequest], max_concurrency: Any
    ) -> ServeOutput:
        now = [time.perf_counter()]

        async def sleep(dt: float) -> None:
            # one ulp up: now + (due - now) can round to just under due, and a driver that
            # waits until clock() >= due would then wait forever on a virtual clock
            now[0] = math.nextafter(now[0] + dt, math.inf)
            await asyncio.sleep(0)

        async def submit(request: ScheduledRequest, arrival: float) -> RequestTimeline:
            return _plant(request, arrival)

        # the virtual clock paces every wait (the driver's precise sleep too, where it has one)
        precise = {"precise_sleep": sleep} if "precise_sleep" in signature(drive).parameters else {}
        start, timelines = asyncio.run(
            drive(requests, max_concurrency, submit, clock=lambda: now[0], sleep=sleep, **precise)
        )
        end = max(t.finish_s or 0.0 for t in timelines)
        time.sleep(max(0.0, end - time.perf_counter()) + 0.02)
        # planted engine steps: batches of 1, then 3 for 10 ms, then 2 for 30 ms
        steps = [
            EngineStep(start + 0.01, 1, 5, 0),
            EngineStep(start + 0.02, 3, 0, 3),
            EngineStep(start + 0.05, 2, None, None),
        ]
        self.served = ServeOutput(start, end, timelines, "scheduled send", steps=steps)
        return self.served

    def unload(self, loaded: LoadedModel | None) -> None:
        pass


def _schedule(traffic: Any, prompts: Sequence[Prompt]) -> list[ScheduledRequest]:
    return [
        ScheduledRequest(i, i % len(prompts), prompts[i % len(prompts)], i * GAP_S)
        for i in range(N)
    ]


@pytest.fixture
def served_run(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from llem.testing.tinymodel import tiny_tokenizer

    trace = tmp_path / "trace.csv"
    trace.write_text(f"time_s,device,power_w\n0,g,{POWER_W}\n100000,g,{POWER_W}\n")
    base = [
        "measurement.warmup=0",
        "measurement.cooldown_s=0",
        "measurement.idle_baseline_s=0",
        "dataset.n_prompts=4",
        "measurement.energy=replay",
        f"measurement.replay_trace={trace}",
    ]
    # traffic.warmup_requests and cooldown_requests left null: 10 % of the 20 requests each, 2
    serving = [
        "traffic=constant",
        f"traffic.rate_per_s={1 / GAP_S}",
        f"traffic.n_requests={N}",
        "pytorch.batching=continuous",
        "slo.ttft_ms=5",
        "slo.tpot_ms=1.5",
        "measurement.min_steady_state_s=0.05",
    ]
    exp = to_experiment(compose_tiny(tiny_model_dir, *base, *serving))
    fake = FakeServingBackend(tiny_tokenizer())
    monkeypatch.setattr(runner_module, "create_backend", lambda exp, run_dir: fake)
    monkeypatch.setattr(serving_module, "build_schedule", _schedule)
    run_dir = tmp_path / "run"
    result = Runner().run(exp, run_dir)
    return result, fake, run_dir


def test_a_served_workload_fills_every_serving_section(served_run) -> None:
    result, fake, run_dir = served_run
    assert result.status == "ok" and fake.served is not None
    assert result.workload.requests == N and result.workload.output_tokens == 4 * N
    assert result.workload.passes == 1  # served once: no pass repetition
    # latency by vLLM bench serve's definitions, from the actual send: TTFT 4 ms (even) / 3.5 ms
    # (odd: sent 0.5 ms late); e2e 8 / 8.5 ms; TPOT 4/3 and 5/3 ms; one ITL per chunk
    lat = result.latency
    assert lat.ttft_origin == "actual send"
    assert (lat.ttft_ms.p50, lat.e2e_ms.p50) == (pytest.approx(3.75), pytest.approx(8.25))
    assert lat.tpot_ms.p50 == pytest.approx(1.5)
    assert lat.itl_ms.p50 == pytest.approx(2.25)  # [2, 2] x 10 and [2.5, 2.5] x 10
    # pacing: 10 on time, 10 sent 0.5 ms late -> p50 between them, p99 and max 0.5
    t = result.traffic
    assert (t.kind, t.rate_per_s, t.n_requests) == ("constant", 100.0, N)
    assert t.pacing_lateness_ms.p50 == pytest.approx(0.25, abs=1e-3)
    assert t.pacing_lateness_ms.max == pytest.approx(0.5, abs=1e-3)
    # steady state (open loop, 2 warm-up, 2 cool-down): from the 2nd finish (request 1 at
    # 0.01 + 0.004 + 2 x 0.0025 = 0.019) to the arrival of request 18 (0.18): 0.161 s
    s = result.steady_state
    assert s is not None and s.rule == "open_loop"
    assert s.window_s == pytest.approx(0.161, abs=1e-6)
    assert s.end_s - s.start_s == pytest.approx(0.161, abs=1e-6)
    # request 1's last chunk (2 tokens) sits on the start edge; requests 2..17 are inside
    assert (s.output_tokens, s.requests) == (2 + 16 * 4, 17)
    assert s.energy_j == pytest.approx(POWER_W * 0.161, rel=1e-4)  # replay: exact
    assert s.avg_power_w == pytest.approx(POWER_W, rel=1e-4)
    assert s.j_per_output_token == pytest.approx(POWER_W * 0.161 / 66, rel=1e-4)
    assert s.energy_j_uncertainty is not None and s.energy_j_uncertainty < 1e-6
    # in flight: even requests 8 ms (sent on time), odd 8.5 ms (sent 0.5 ms late), never two
    c = result.concurrency
    assert (c.knob, c.knob_value, c.max) == ("pytorch.batch_size", 8, 1)
    # the engine's own batch, step-duration weighted: (3 x 0.01 + 2 x 0.03) / 0.04
    assert c.engine_running_mean == pytest.approx(2.25) and c.engine_running_max == 3
    steps = read_steps(run_dir)
    assert [(s.running, s.prefill_tokens, s.decode_tokens) for s in steps] == [
        (1, 5, 0),
        (3, 0, 3),
        (2, None, None),
    ]
    assert steps[2].end_s - steps[0].end_s == pytest.approx(0.04, abs=1e-5)
    assert c.steady_state_mean == pytest.approx((8 * 0.008 + 8 * 0.0085) / 0.161, rel=1e-4)
    assert c.mean == pytest.approx((10 * 0.008 + 10 * 0.0085) / result.energy.window_s, rel=1e-4)
    # goodput: TPOT SLO 1.5 ms -> the 10 even requests (40 tokens) meet it
    g = result.goodput
    assert (g.requests_met, g.fraction, g.slo_tpot_ms) == (10, 0.5, 1.5)
    assert g.requests_per_s == pytest.approx(10 / result.energy.window_s, rel=1e-3)
    assert g.j_per_output_token == pytest.approx(result.energy.total_j / 40, rel=1e-6)
    assert result.validity.checks["steady_state"] == "passed"
    assert result.null_reasons["compute.decode_bandwidth_utilisation"].startswith(
        "not estimated for a served workload"
    )
    # requests.jsonl, read back through the result module
    records = read_requests(run_dir)
    assert [r.request_id for r in records] == list(range(N))
    # times from the window's start: the origin sits 0.019 s before the steady state's start
    assert records[0].scheduled_s == pytest.approx(s.start_s - 0.019, abs=1e-6)
    r1 = records[1]
    assert r1.scheduled_s - records[0].scheduled_s == pytest.approx(GAP_S, abs=1e-6)
    assert r1.sent_s - r1.scheduled_s == pytest.approx(0.0005, abs=1e-6)
    assert r1.finish_s == pytest.approx(s.start_s, abs=1e-6)  # the steady state's start edge
    assert (r1.ttft_ms, r1.tpot_ms, r1.e2e_ms, r1.slo_met) == (
        pytest.approx(3.5),  # from its actual send, 0.5 ms late
        pytest.approx(5 / 3, rel=1e-3),
        pytest.approx(8.5),
        False,
    )
    assert records[2].scheduled_s - records[0].scheduled_s == pytest.approx(0.02, abs=1e-9)
    written = json.loads((run_dir / "result.json").read_text())
    assert written["schema_version"] == 8 and written["steady_state"]["rule"] == "open_loop"


def test_a_served_workload_keeps_llems_own_latency_under_its_own_names(served_run) -> None:
    """From the schedule (the planted 0.5 ms lateness of odd requests inside), ITL per token."""
    result, _, run_dir = served_run
    lat = result.latency
    assert lat.ttft_from_schedule_ms.p50 == pytest.approx(4.0)
    assert lat.ttft_from_schedule_ms.p99 == pytest.approx(4.0)
    assert lat.e2e_from_schedule_ms.p50 == pytest.approx(8.5)  # 8 (even) / 9 ms (odd)
    assert lat.itl_per_token_ms.p50 == pytest.approx(1.25)  # [2, 1, 1] and [2.5, 1.25, 1.25]
    r1 = read_requests(run_dir)[1]
    assert (r1.ttft_ms, r1.ttft_from_schedule_ms) == (pytest.approx(3.5), pytest.approx(4.0))


@pytest.mark.slow
def test_an_offline_generate_run_gets_requests_and_the_serving_sections(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from llem.testing.cli import run_tiny

    caplog.set_level("WARNING", logger="llem.run")
    result = run_tiny(
        tiny_model_dir,
        tmp_path,
        "measurement.warmup=0",
        "decoder.max_new_tokens=3",
        "dataset.n_prompts=3",
        "pytorch.batch_size=2",
    )
    records = read_requests(tmp_path)
    assert len(records) == 3 and [r.prompt_index for r in records] == [0, 1, 2]
    # every request of a static batch is sent at its batch's start; nothing schedules it
    assert records[0].sent_s == records[1].sent_s
    assert records[2].sent_s > records[0].finish_s - 1e-9
    assert all(r.scheduled_s is None and r.ttft_from_schedule_ms is None for r in records)
    assert result["latency"]["ttft_origin"] == "batch start"  # batches of 2 of the 3 prompts
    assert result["latency"]["ttft_from_schedule_ms"]["p50"] is None
    assert result["latency"]["e2e_ms"]["p50"] is not None
    assert result["traffic"]["kind"] == "offline" and result["traffic"]["n_requests"] == 3
    conc = result["concurrency"]
    assert conc["knob"] == "pytorch.batch_size" and conc["knob_value"] == 2 and conc["max"] == 2
    assert 0 < conc["mean"] <= 2
    # static batches fill and drain: no steady state is meant, so none is judged and its
    # absence is no recorded condition (it would be repeated under every report's table)
    assert result["steady_state"] is None
    assert result["null_reasons"]["steady_state"] == STATIC_REASON
    assert result["goodput"] is None and "no SLO set" in result["null_reasons"]["goodput"]
    assert result["validity"]["checks"]["steady_state"] == "not checked"
    assert not any("steady state" in c for c in result["validity"]["conditions"])
    # static batches have engine steps too: a prefill step, then decode steps, per batch
    assert conc["engine_running_max"] == 2 and conc["engine_running_mean"] is not None
    assert len(read_steps(tmp_path)) == 2 * 3
    # nor is more requests asked for: static batches never get a steady state
    assert not [r for r in caplog.records if "maximum batch" in r.getMessage()]


@pytest.mark.slow
def test_an_offline_generate_run_sends_traffic_n_requests_cycling_through_the_prompts(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """traffic.n_requests is honoured by generate runs too, never silently ignored."""
    from llem.testing.cli import run_tiny

    result = run_tiny(
        tiny_model_dir,
        tmp_path,
        "measurement.warmup=0",
        "decoder.max_new_tokens=2",
        "dataset.n_prompts=2",
        "traffic.n_requests=5",
        "pytorch.batch_size=2",
    )
    records = read_requests(tmp_path)
    assert [r.prompt_index for r in records] == [0, 1, 0, 1, 0]
    assert result["workload"]["requests"] == 5 and result["traffic"]["n_requests"] == 5


@pytest.mark.parametrize(
    "traffic",
    [
        ["traffic=offline"],
        ["traffic=poisson", "traffic.rate_per_s=50"],
        ["traffic=gamma", "traffic.rate_per_s=50", "traffic.burstiness=0.5"],
        ["traffic=constant", "traffic.rate_per_s=50"],
        ["traffic=concurrency", "traffic.max_concurrency=2"],
    ],
)
@pytest.mark.slow
def test_every_traffic_kind_runs_through_continuous_batching_end_to_end(
    tiny_model_dir: Path, tmp_path: Path, traffic: list[str]
) -> None:
    """The real CLI, the real transformers continuous batching, each traffic kind."""
    from llem.testing.cli import output
    from llem.testing.forked_cli import run_llem

    run_dir = tmp_path / "run"
    proc = run_llem(
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "pytorch.batching=continuous",
        "pytorch.batch_size=2",
        "decoder.max_new_tokens=4",
        "measurement.warmup=0",
        "traffic.n_requests=6",
        *traffic,
        f"hydra.run.dir={run_dir}",
    )
    assert proc.returncode == 0, output(proc)
    r = json.loads((run_dir / "result.json").read_text())
    assert r["status"] == "ok" and r["traffic"]["kind"] == traffic[0].split("=")[1]
    assert r["workload"]["requests"] == 6
    records = read_requests(run_dir)
    assert len(records) == 6 and all(x.output_tokens >= 1 for x in records)
    assert all(x.first_token_s is not None and x.sent_s is not None for x in records)
    assert r["latency"]["ttft_origin"] == "actual send"  # every served request: its own send
    assert "serving:" in proc.stdout or traffic[0] == "traffic=offline"

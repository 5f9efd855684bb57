"""The latency figures' conventions (issue 28, items 7 and 8): vLLM bench serve's definitions for
the published figures, llem's own under their own names, and what TTFT is measured from.

vLLM's reference (vllm/benchmarks/lib/endpoint_request_func.py): ``st = time.perf_counter()``
when the request is sent; at the first chunk ``ttft = timestamp - st``; at every later chunk
``itl.append(timestamp - most_recent_timestamp)``, one entry per chunk whatever its tokens."""

from __future__ import annotations

import pytest

from llem.figures.serving import latency_figures, pacing_lateness_ms, request_figures
from llem.figures.timelines import ALL_AT_ONCE, BATCH_START, batches_ttft_origin
from llem.result import RunResult, migrate
from llem.vocabulary.workload import BatchOutput, RequestTimeline


def _timeline(sent: float, times: list[float], tokens: list[int], scheduled: float | None):
    return RequestTimeline(
        request_id=0,
        prompt_index=0,
        arrival_s=sent if scheduled is None else scheduled,
        scheduled_s=scheduled,
        sent_s=sent,
        chunk_times_s=times,
        chunk_tokens=tokens,
        input_tokens=4,
    )


def test_itl_is_one_gap_per_streamed_chunk_as_vllm_bench_serve() -> None:
    # chunks of 1, 3 and 1 tokens; the 3-token chunk 30 ms after the first, the last 10 ms later
    f = request_figures(_timeline(0.0, [0.100, 0.130, 0.140], [1, 3, 1], None))
    assert f.itl_s == pytest.approx((0.030, 0.010))  # vLLM bench serve: [30, 10] ms
    assert f.itl_per_token_s == pytest.approx((0.010,) * 4)  # llem's own: [10, 10, 10, 10]
    assert sum(f.itl_s) == pytest.approx(f.e2e_s - f.ttft_s)  # as vLLM's ITLs add up
    assert f.tpot_s == pytest.approx(0.040 / 4)  # (e2e - TTFT) / (5 - 1)
    lat = latency_figures([f])
    assert lat.itl_ms == pytest.approx({"p50": 20.0, "p90": 28.0, "p99": 29.8})
    assert lat.itl_per_token_ms == pytest.approx({"p50": 10.0, "p90": 10.0, "p99": 10.0})


def test_ttft_runs_from_the_actual_send_with_the_lateness_recorded_apart() -> None:
    # planted schedule: sends due at 0, 0.1, 0.2 s went out 0, 2 and 15 ms late; every first
    # token came 50 ms after the actual send, the last 20 ms after the first
    late = [0.0, 0.002, 0.015]
    timelines = [
        _timeline(due + lag, [due + lag + 0.050, due + lag + 0.070], [1, 1], due)
        for due, lag in zip([0.0, 0.1, 0.2], late, strict=True)
    ]
    lat = latency_figures([request_figures(t) for t in timelines])
    assert lat.ttft_ms == pytest.approx({"p50": 50.0, "p90": 50.0, "p99": 50.0})
    assert lat.e2e_ms == pytest.approx({"p50": 70.0, "p90": 70.0, "p99": 70.0})
    # llem's own: from the scheduled send, the lateness inside (50, 52, 65 ms)
    assert lat.ttft_from_schedule_ms == pytest.approx({"p50": 52.0, "p90": 62.4, "p99": 64.74})
    assert pacing_lateness_ms(timelines) == pytest.approx({"p50": 2.0, "p99": 14.74, "max": 15.0})


def _batch(n: int) -> BatchOutput:
    return BatchOutput(0.0, 1.0, [3] * n, [2] * n, [0.5, 1.0], [1, 1])


def test_generate_batches_name_what_their_ttft_runs_from() -> None:
    # PyTorch static batches of 2 out of 5 prompts: each from its own batch's start
    assert batches_ttft_origin([_batch(2), _batch(2), _batch(1)], n_prompts=5) == BATCH_START
    # vLLM offline generate: every prompt handed over at once (queueing inside TTFT)
    assert batches_ttft_origin([_batch(5)], n_prompts=5) == ALL_AT_ONCE
    assert batches_ttft_origin([_batch(5), _batch(5)], n_prompts=5) == ALL_AT_ONCE  # 2 passes
    assert BATCH_START != ALL_AT_ONCE


def _v4(origin: str, backend: str = "pytorch", batch_size: int = 2) -> dict:
    pct = {"p50": 10.0, "p90": 20.0, "p99": 30.0}
    return {
        "schema_version": 4,
        "status": "ok",
        "backend": backend,
        "workload": {"n_prompts": 4, "batch_size": batch_size},
        "latency": {
            "ttft_origin": origin,
            "ttft_ms": dict(pct),
            "itl_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0},
            "e2e_ms": {"p50": 100.0, "p90": 200.0, "p99": 300.0},
            "request_latency_s": {"p50": 0.1, "p90": 0.2, "p99": 0.3},
            "tpot_ms": dict(pct),
        },
        "null_reasons": {},
    }


def test_a_schema_4_open_loop_result_keeps_its_meaning_under_the_new_names() -> None:
    data = migrate(_v4("scheduled send"))
    lat, why = data["latency"], data["null_reasons"]
    assert data["schema_version"] == 8  # through 5, 6, 7, then 8
    assert lat["ttft_from_schedule_ms"]["p50"] == 10.0 and lat["ttft_ms"]["p50"] is None
    assert lat["e2e_from_schedule_ms"]["p99"] == 300.0 and lat["e2e_ms"]["p99"] is None
    assert lat["request_latency_s"]["p50"] is None and "schema 5" in why["latency.ttft_ms"]
    assert lat["itl_per_token_ms"]["p90"] == 2.0 and lat["itl_ms"]["p90"] is None
    assert "itl_per_token_ms" in why["latency.itl_ms"]
    assert lat["tpot_ms"]["p50"] == 10.0  # the same under both definitions
    assert lat["ttft_origin"] == "actual send"  # what ttft_ms (null here) now means
    r = RunResult.from_json(data)
    assert r.latency.ttft_from_schedule_ms.p50 == 10.0


def test_a_schema_4_generate_result_names_its_origin() -> None:
    static = migrate(_v4("batch start"))["latency"]
    assert static["ttft_origin"] == "batch start" and static["ttft_ms"]["p50"] == 10.0
    assert migrate(_v4("batch start", backend="vllm"))["latency"]["ttft_origin"] == ALL_AT_ONCE
    assert migrate(_v4("batch start", batch_size=4))["latency"]["ttft_origin"] == ALL_AT_ONCE
    closed = migrate(_v4("actual send"))["latency"]
    assert closed["ttft_ms"]["p50"] == 10.0 and closed["ttft_from_schedule_ms"]["p50"] is None

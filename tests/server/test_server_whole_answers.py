"""Whole answers (``server.stream=false``) and text prompts (``server.prompt_token_ids=false``),
for a server whose stream carries no usage and whose prompts are text only (llama-cpp-python's):
the counts are the answer's planted usage, the e2e is the answer's arrival, and every figure that
needs per-token times is null with the reason, never a guess (goodput included)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from llem.backends import create_backend
from llem.backends.server.client import (
    WHOLE_ANSWERS,
    ClientConfig,
    HttpTimeline,
    serve_async,
)
from llem.config.schema import ExperimentConfig
from llem.config.server import Launch, ServerConfig, sends_token_ids, streams
from llem.errors import RunError
from llem.figures.serving import Slo, request_figures, slo_met
from llem.testing.cli import run_tiny
from llem.vocabulary.workload import Prompt, ScheduledRequest, ServeOutput
from tests.server.fake_openai import MODEL, Plan, fake_server
from tests.server.fake_thread import fake_in_thread

PLANTED = {"prompt_tokens": 6, "completion_tokens": 9}
DELAYS_S = (0.15, 0.1)  # the planted chunks' delays: the answer comes whole after both


def _plan(**kw: Any) -> Plan:
    chunks = [(DELAYS_S[0], "ab", None), (DELAYS_S[1], "c", None)]
    return Plan(chunks=chunks, usage=kw.pop("usage", dict(PLANTED)), **kw)


def _serve(plan: Plan, **config: Any) -> ServeOutput:
    async def go() -> ServeOutput:
        async with fake_server(plan) as url:
            cfg = ClientConfig(base_url=url, **{"model": MODEL, "max_tokens": 9, **config})
            prompt = Prompt(token_ids=(5, 6, 7))
            return await serve_async([ScheduledRequest(0, 0, prompt, 0.0)], None, cfg)

    return asyncio.run(go())


@pytest.mark.parametrize("chat", [False, True])
def test_a_whole_answer_counts_its_usage_and_has_no_first_token(chat: bool) -> None:
    plan = _plan()
    out = _serve(plan, stream=False, chat=chat, detokenize=lambda ids: "text")
    body = plan.seen[0]["body"]
    assert body["stream"] is False and "stream_options" not in body
    (t,) = out.requests
    assert isinstance(t, HttpTimeline) and t.whole
    assert (t.output_tokens, t.input_tokens) == (9, 6)  # the usage, not the text's 3 characters
    assert t.chunk_tokens == [9] and t.chunk_tokens_reason is None
    assert t.first_token_s is None and t.finish_s is not None
    assert sum(DELAYS_S) <= t.finish_s - t.sent_s < sum(DELAYS_S) + 0.25
    assert out.token_times == WHOLE_ANSWERS
    f = request_figures(t)
    assert f.ttft_s is None and f.tpot_s is None and f.itl_s == ()
    assert f.e2e_s == pytest.approx(t.finish_s - t.sent_s)
    assert f.e2e_from_schedule_s is not None


def test_a_streamed_answer_keeps_its_per_token_times() -> None:
    out = _serve(_plan())
    (t,) = out.requests
    assert out.token_times is None and t.first_token_s is not None
    assert request_figures(t).ttft_s is not None


def test_a_whole_answer_without_usage_says_so() -> None:
    (t,) = _serve(_plan(usage=None), stream=False).requests
    assert isinstance(t, HttpTimeline) and t.completion_tokens is None
    assert t.usage_reason == "the server's answer carried no usage"


def test_text_prompts_for_a_server_that_takes_no_token_ids() -> None:
    plan = _plan(text_prompts_only=True)
    (t,) = _serve(
        plan, token_id_prompts=False, detokenize=lambda ids: " ".join(map(str, ids))
    ).requests
    assert plan.seen[0]["body"]["prompt"] == "5 6 7" and t.output_tokens == 9
    with pytest.raises(RunError, match="HTTP 422"):
        _serve(_plan(text_prompts_only=True))


def test_slos_without_a_first_token_judge_e2e_only() -> None:
    (t,) = _serve(_plan(), stream=False).requests
    f = request_figures(t)
    assert slo_met(f, Slo(e2e_ms=10_000)) is True
    assert slo_met(f, Slo(e2e_ms=1)) is False
    assert slo_met(f, Slo(ttft_ms=10_000)) is False  # not known: not met


def test_llamacpp_streams_no_usage_and_takes_text_by_default() -> None:
    assert not streams(ServerConfig(launch=Launch.llamacpp))
    assert not sends_token_ids(ServerConfig(launch=Launch.llamacpp))
    assert streams(ServerConfig(launch=Launch.vllm)) and streams(ServerConfig(url="http://x"))
    assert sends_token_ids(ServerConfig(url="http://x"))
    assert streams(ServerConfig(launch=Launch.llamacpp, stream=True))
    assert not sends_token_ids(ServerConfig(url="http://x", prompt_token_ids=False))


def test_llamacpps_server_runs_one_request_at_a_time() -> None:
    exp = ExperimentConfig(backend="server")  # type: ignore[arg-type]
    exp.server = ServerConfig(launch=Launch.llamacpp)
    assert create_backend(exp).batch_size(None) == 1  # type: ignore[arg-type]
    exp.server = ServerConfig(launch=Launch.vllm)
    assert create_backend(exp).batch_size(None) == 0  # type: ignore[arg-type]


N_REQUESTS = 5


def _run(model: Path, tmp_path: Path, plan: Plan, *extra: str) -> dict[str, Any]:
    with fake_in_thread(plan) as url:
        return run_tiny(
            model,
            tmp_path / "run",
            "+backend=server",
            f"server.url={url}",
            "server.model=fake-model",
            f"traffic.n_requests={N_REQUESTS}",
            "measurement.warmup=0",
            *extra,
        )


@pytest.mark.slow
def test_a_run_of_whole_answers_has_e2e_and_says_why_the_rest_is_null(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    plan = _plan(text_prompts_only=True)
    result = _run(
        tiny_model_dir,
        tmp_path,
        plan,
        "server.stream=false",
        "server.prompt_token_ids=false",
        "slo.e2e_ms=60000",
    )
    assert result["status"] == "ok", result.get("error")
    assert result["workload"]["output_tokens"] == N_REQUESTS * PLANTED["completion_tokens"]
    assert all(isinstance(s["body"]["prompt"], str) for s in plan.seen)
    lat, why = result["latency"], result["null_reasons"]
    assert lat["e2e_ms"]["p50"] >= sum(DELAYS_S) * 1000
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "itl_per_token_ms", "ttft_from_schedule_ms"):
        assert lat[key]["p50"] is None and why[f"latency.{key}"] == WHOLE_ANSWERS
    assert result["concurrency"]["running_mean"] is None
    assert why["concurrency.running_max"] == WHOLE_ANSWERS
    assert result["goodput"]["fraction"] == 1.0  # judged on e2e alone
    rows = [json.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    assert {r["output_tokens"] for r in rows} == {9}
    assert all(r["first_token_s"] is None and r["e2e_ms"] is not None for r in rows)


@pytest.mark.slow
def test_a_ttft_slo_on_whole_answers_leaves_goodput_null_with_the_reason(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    result = _run(tiny_model_dir, tmp_path, _plan(), "server.stream=false", "slo.ttft_ms=500")
    assert result["status"] == "ok" and result["goodput"] is None
    assert result["null_reasons"]["goodput"] == f"slo.ttft_ms cannot be judged: {WHOLE_ANSWERS}"


@pytest.mark.slow
def test_a_stream_without_usage_names_the_way_out(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"server\.stream=false asks for whole answers"):
        _run(tiny_model_dir, tmp_path, _plan(usage=None))

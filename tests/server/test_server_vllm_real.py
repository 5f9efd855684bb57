"""vLLM's real OpenAI server, launched with the preset on a tiny random model: 4 streamed
requests whose token counts are the server's usage, and the server's process group gone after.

Marked ``vllm``: run it with the vLLM environment's interpreter (/work/main/.venv-vllm or
scripts/setup.sh --vllm); elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from llem.backends.server.client import ClientConfig, serve_async
from llem.backends.server.launch import group_alive, launch, vllm_command
from llem.backends.server.metrics import MetricsScraper, ServerMetrics
from llem.backends.types import Prompt, ScheduledRequest, ServeOutput
from llem.testing.tinymodel import HEAD64, build_tiny_model

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not importable here (its environment: scripts/setup.sh --vllm)",
    ),
]

MAX_TOKENS = 8
PROMPTS = [(5, 6, 7), (8, 9, 10, 11), (12, 13), (14, 15, 16, 17, 18)]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _measure(url: str, model: str) -> tuple[ServeOutput, ServerMetrics]:
    config = ClientConfig(
        base_url=url,
        model=model,
        max_tokens=MAX_TOKENS,
        min_tokens=MAX_TOKENS,
        ignore_eos=True,
        request_timeout_s=300,
        extra_body={"return_token_ids": True},  # vLLM: each chunk's token ids
    )
    requests = [ScheduledRequest(i, i, Prompt(token_ids=p), 0.0) for i, p in enumerate(PROMPTS)]
    scraper = MetricsScraper(url, poll_ms=200)
    async with scraper:
        out = await serve_async(requests, None, config)
    assert scraper.result is not None
    return out, scraper.result


def test_vllm_server_usage_counts_and_the_group_gone_after(tmp_path: Path) -> None:
    model = str(build_tiny_model(tmp_path / "model", **HEAD64))
    port = _port()
    spec = vllm_command(
        model,
        port,
        dtype="float32",
        max_num_seqs=4,
        cpu_kv_cache_gib=1,
        passthrough={"enforce_eager": True, "max_model_len": 256},
        python=sys.executable,
    )
    url = f"http://127.0.0.1:{port}"
    with launch(spec, url, tmp_path / "logs", ready_timeout_s=540) as server:
        assert server.record is not None and server.pid is not None
        pgid = server.pid
        print(f"\nvLLM server launch-to-ready: {server.record.launch_to_ready_s:.1f} s")
        out, metrics = asyncio.run(_measure(url, model))
        version = server.record.version
    assert not group_alive(pgid)
    import vllm

    assert version == vllm.__version__
    _check(out, metrics)
    with pytest.raises(ProcessLookupError):
        os.kill(pgid, 0)


def _check(out: ServeOutput, metrics: ServerMetrics) -> None:
    timelines: list[Any] = out.requests
    assert len(timelines) == len(PROMPTS)
    for t, prompt in zip(timelines, PROMPTS, strict=True):
        assert t.usage_reason is None
        assert t.prompt_tokens == len(prompt) == t.input_tokens
        assert t.completion_tokens == MAX_TOKENS == t.output_tokens  # ignore_eos honoured
        assert sum(t.chunk_tokens) == MAX_TOKENS and t.chunk_tokens_reason is None
        assert t.first_token_s is not None and t.first_token_s > t.sent_s
    assert metrics.family == "vllm", metrics.reason
    generated = sum(i.generation_tokens or 0 for i in metrics.intervals())
    assert generated == MAX_TOKENS * len(PROMPTS)

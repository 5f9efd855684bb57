"""A whole ``+backend=server server.launch=vllm`` run on a tiny random model: vLLM's real OpenAI
server launched for the point, the run's token counts its usage (min_new_tokens = max_new_tokens
with ignore_eos: each request's exact length), the result's server section with the server's own
/metrics view, and the server's process group gone after the run. (It replaces a second test that
launched its own server for the client alone: one vLLM start per CI run is enough.)

Marked ``vllm``: run it with the vLLM environment's interpreter (/work/main/.venv-vllm or
scripts/setup.sh --vllm); elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from llem.backends.server import launch as launch_module
from llem.backends.server.launch import LaunchedServer, group_alive
from llem.testing.cli import run_tiny
from llem.testing.tinymodel import HEAD64, build_tiny_model

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not importable here (its environment: scripts/setup.sh --vllm)",
    ),
]

MAX_TOKENS = 8
N_REQUESTS = 6


def test_a_launched_vllm_server_run_counts_its_usage_and_is_stopped_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_tiny_model(tmp_path / "model", **HEAD64)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    started: list[LaunchedServer] = []
    start = LaunchedServer.start

    def recording_start(self: LaunchedServer) -> Any:
        started.append(self)
        return start(self)

    monkeypatch.setattr(launch_module.LaunchedServer, "start", recording_start)
    result = run_tiny(
        model,
        tmp_path / "run",
        "+backend=server",
        "server.launch=vllm",
        "server.ready_timeout_s=540",
        "server.max_num_seqs=4",
        "model.dtype=float32",
        "+server.args.enforce_eager=true",
        "+server.args.max_model_len=256",
        f"decoder.max_new_tokens={MAX_TOKENS}",
        f"decoder.min_new_tokens={MAX_TOKENS}",
        f"traffic.n_requests={N_REQUESTS}",
        "dataset=synthetic",
        "dataset.input_tokens=16",
        "measurement.warmup=1",
    )
    (server,) = started
    assert server.pid is not None and not group_alive(server.pid)
    assert result["status"] == "ok", result.get("error")
    assert result["workload"]["output_tokens"] == MAX_TOKENS * N_REQUESTS
    section = result["server"]
    import vllm

    assert section["launched"] is True and section["version"] == vllm.__version__
    assert "--max-num-seqs 4" in section["command"] and "--dtype float32" in section["command"]
    assert section["launch_to_ready_s"] > 0
    print(f"\nvLLM server launch-to-ready: {section['launch_to_ready_s']:.1f} s")
    # the server's own view of the window: vLLM's /metrics, its counters beside the usage
    assert section["metrics_source"] == "vllm", result["null_reasons"].get("server.metrics_source")
    assert section["usage_completion_tokens"] == MAX_TOKENS * N_REQUESTS
    print(
        f"vLLM /metrics over the window: {section['generation_tokens']} generated tokens "
        f"(usage: {section['usage_completion_tokens']}), running mean "
        f"{section['running_requests_mean']} max {section['running_requests_max']}, "
        f"{section['metrics_polls']} polls"
    )
    assert section["generation_tokens"] == MAX_TOKENS * N_REQUESTS
    assert section["prompt_tokens"] == section["usage_prompt_tokens"]
    if section["running_requests_max"] is None:  # the window was shorter than a poll interval
        why = result["null_reasons"]["server.running_requests_max"]
        assert why.startswith("no poll fell between the first request and the last answer")
    else:
        assert 0 < section["running_requests_max"] <= 4  # server.max_num_seqs
    assert (tmp_path / "run" / "server_metrics.csv").exists()
    # each request as the server counted it: its exact length (ignore_eos honoured) and its
    # finish. The tiny random model's tokens may all decode to no text: such a request has no
    # first-token time (null, not a guess), but its stream's end is its finish.
    lines = (tmp_path / "run" / "requests.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert len(rows) == N_REQUESTS
    assert all(r["output_tokens"] == MAX_TOKENS for r in rows)
    assert all(r["finish_s"] is not None and r["finish_s"] > r["sent_s"] for r in rows), rows
    timed = [r for r in rows if r["first_token_s"] is not None]
    assert timed and all(r["sent_s"] < r["first_token_s"] <= r["finish_s"] for r in timed)

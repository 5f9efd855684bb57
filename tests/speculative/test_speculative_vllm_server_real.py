"""``+backend=server server.launch=vllm speculative=draft`` for real: vLLM's OpenAI server
launched by llem with ``--speculative-config``, the target as its own draft (under greedy
decoding every proposal is accepted: a planted truth), and the speculative section read from the
server's own /metrics counters against the server's generated tokens and the requests' usage."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from llem.testing.cli import output, run_llem
from llem.testing.tinymodel import HEAD64, build_tiny_model

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not importable here (its environment: scripts/setup.sh --vllm)",
    ),
]

N_REQUESTS, MAX_TOKENS, K = 4, 12, 3


def test_a_launched_vllm_servers_counters_fill_the_section(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "model", **HEAD64)
    run_dir = tmp_path / "run"
    proc = run_llem(
        "+backend=server",
        "server.launch=vllm",
        "server.ready_timeout_s=540",
        "server.max_num_seqs=2",
        "+server.args.enforce_eager=true",
        "+server.args.max_model_len=256",
        "model=hf",
        "model.dtype=float32",
        f"model.name_or_path={model}",
        "dataset=synthetic",
        "dataset.input_tokens=16",
        f"traffic.n_requests={N_REQUESTS}",
        "decoder=greedy",
        f"decoder.max_new_tokens={MAX_TOKENS}",
        f"decoder.min_new_tokens={MAX_TOKENS}",
        "measurement.energy=none",
        "measurement.warmup=1",
        "speculative=draft",
        f"speculative.draft_model={model}",
        f"speculative.num_tokens={K}",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, output(proc)
    r = json.loads((run_dir / "result.json").read_text())
    server, s = r["server"], r["speculative"]
    assert "--speculative-config" in server["command"]
    assert s is not None, r["null_reasons"].get("speculative")
    assert s["mechanism"].endswith("counted from its /metrics")
    # the window's counters only: the warm-up's requests finished before its first poll
    assert s["tokens_generated"] == server["generation_tokens"] == N_REQUESTS * MAX_TOKENS
    assert s["tokens_generated"] == server["usage_completion_tokens"]
    assert 0 < s["draft_tokens_proposed"] <= K * s["steps_with_proposals"]
    assert s["acceptance_rate"] == 1.0  # the target as its own draft, greedy
    assert s["target_steps"] == s["tokens_generated"] - s["draft_tokens_accepted"]
    assert s["request_draft_tokens_proposed"] == []
    assert "speculative.request_draft_tokens_proposed" in r["null_reasons"]
    assert r["null_reasons"]["speculative.j_per_accepted_draft_token"].startswith(
        "energy.total_j is null"
    )

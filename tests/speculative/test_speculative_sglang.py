"""A launched SGLang server's speculation: the group as SGLang's ``--speculative-*`` flags, the
pre-flight refusals, and the section left null with the reason naming what SGLang's gauges said
(planted in the fake server's /metrics) and why they are not the window's (issue 42)."""

from __future__ import annotations

import pytest

from llem.backends import sections
from llem.backends.server import speculation, watch
from llem.backends.server.client import ClientConfig
from llem.backends.server.presets import launch_spec
from llem.config.engines import active_engine
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.result import RunResult
from llem.runner.engine_facts import write_window_facts
from llem.runner.preflight import engine_preflight
from llem.vocabulary.facts import WindowFacts
from llem.vocabulary.workload import Prompt, ScheduledRequest
from tests.server.fake_openai import MODEL, Plan
from tests.server.fake_thread import fake_in_thread
from tests.speculative.test_speculative_config import _exp

NGRAM = SpeculativeConfig(method=SpeculativeMethod.ngram, num_tokens=3)


def _flags(*overrides: str) -> list[str]:
    """The SGLang command's words after ``--port N``."""
    exp = _exp("+backend=server", "server.launch=sglang", *overrides)
    cmd = list(launch_spec(sections(exp), 8000).command)
    return cmd[cmd.index("--port") + 2 :]


def test_ngram_is_sglangs_ngram_algorithm_as_a_chain_of_num_tokens_proposals() -> None:
    assert _flags("speculative=ngram", "speculative.num_tokens=4") == [
        *("--speculative-algorithm", "NGRAM"),
        *("--speculative-num-draft-tokens", "5"),  # the chain's root is the last verified token
        *("--speculative-ngram-max-bfs-breadth", "1"),
        "--enable-metrics",
    ]


def test_draft_is_sglangs_standalone_algorithm_with_one_token_per_draft_step(tmp_path) -> None:
    draft = tmp_path / "draft"
    draft.mkdir()
    flags = _flags("speculative=draft", f"speculative.draft_model={draft}")
    assert flags == [
        *("--speculative-algorithm", "STANDALONE"),
        *("--speculative-draft-model-path", str(draft)),
        *("--speculative-num-steps", "5"),
        *("--speculative-eagle-topk", "1"),
        *("--speculative-num-draft-tokens", "6"),
        "--enable-metrics",
    ]
    assert _flags() == ["--enable-metrics"]  # speculative=none: no flag


def _problems(*overrides: str, device: str = "cuda") -> list[str]:
    exp = _exp("+backend=server", "server.launch=sglang", *overrides)
    return engine_preflight(exp, active_engine(exp), device, device == "cuda")


def test_ngram_off_cuda_is_one_line_naming_what_sglang_can_do() -> None:
    line = (
        "speculative=ngram: server.launch=sglang runs NGRAM speculation on CUDA only, and "
        "device=cpu (it can: speculative=draft, or speculative=none)"
    )
    assert _problems("speculative=ngram", device="cpu") == [line]


def test_an_ngram_size_is_refused_on_sglang_in_one_line() -> None:
    assert _problems("speculative=ngram", "speculative.ngram_size=3") == [
        "speculative.ngram_size=3: server.launch=sglang's NGRAM takes no n-gram size (its nearest "
        "flag changed meaning across SGLang releases; it can: speculative=ngram with "
        "speculative.ngram_size unset)"
    ]


def test_server_args_setting_sglangs_speculation_too_is_refused(tmp_path) -> None:
    problems = _problems("speculative=ngram", "+server.args.speculative_num_draft_tokens=8")
    assert problems == [
        "speculative=ngram and server.args.speculative_num_draft_tokens both set the server's "
        "speculation (use one: the speculative group, or speculative=none with the arguments)"
    ]
    # speculative=none leaves SGLang's own flags to server.args
    plain = _problems("+server.args.speculative_algorithm=NGRAM")
    assert not any(p.startswith("speculative") for p in plain), plain


SGLANG_METRICS = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="fake-model",tp_rank="0"} 2.0
sglang:num_queue_reqs{model_name="fake-model",tp_rank="0"} 0.0
sglang:prompt_tokens_total{model_name="fake-model"} 400.0
sglang:generation_tokens_total{model_name="fake-model"} 900.0
sglang:spec_accept_length{model_name="fake-model",tp_rank="0"} %s
sglang:spec_accept_rate{model_name="fake-model",tp_rank="0"} %s
"""


def _record(length: str, rate: str) -> RunResult:
    plan = Plan(chunks=[(0.02, "a", None)], metrics=SGLANG_METRICS % (length, rate))
    requests = [ScheduledRequest(k, k, Prompt(token_ids=[1, 2]), None) for k in range(2)]
    with fake_in_thread(plan) as url:
        config = ClientConfig(base_url=url, model=MODEL, max_tokens=2)
        watched = watch.serve_watched(requests, 2, config, poll_ms=20)
    assert watched.metrics.family == "sglang", watched.metrics.reason
    result = RunResult(status="ok")
    facts = speculation.window_facts(watched.metrics, NGRAM, False, 2)
    write_window_facts(result, WindowFacts(speculative=facts))  # as the run writes them
    return result


def test_sglangs_gauges_are_named_with_their_scope_and_no_figure_is_published() -> None:
    result = _record("2.37", "0.456")
    assert result.speculative is None
    assert result.null_reasons["speculative"] == (
        "speculative=ngram: SGLang's /metrics counts no draft or accepted tokens; its gauges are "
        "means over its last decode log interval, not over the window (at the window's last poll "
        "sglang:spec_accept_length 2.37 tokens per verification step, "
        "sglang:spec_accept_rate 0.456; see docs/speculative.md)"
    )


@pytest.mark.parametrize(("length", "said"), [("0.0", "0 (no decode log interval had ended)")])
def test_a_gauge_sglang_has_not_set_yet_is_not_read_as_zero(length: str, said: str) -> None:
    reason = _record(length, "0.0").null_reasons["speculative"]
    assert f"sglang:spec_accept_length {said} tokens per verification step" in reason
    assert f"sglang:spec_accept_rate {said}" in reason


# sglang.launch_server's stand-in: keeps its arguments, serves the fake with SGLang's gauges
FAKE_LAUNCH_SERVER = """
import asyncio, json, os, sys

from tests.server.fake_openai import Plan, fake_server

argv = sys.argv[1:]
with open(os.environ["FAKE_SGLANG_ARGV"], "w") as f:
    json.dump(argv, f)
METRICS = os.environ["FAKE_SGLANG_METRICS"]


async def main() -> None:
    async with fake_server(Plan(metrics=METRICS), int(argv[argv.index("--port") + 1])):
        await asyncio.Event().wait()


asyncio.run(main())
"""


@pytest.mark.slow
def test_a_launched_sglang_run_passes_the_flags_and_nulls_the_section_with_the_gauges(
    tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """The whole path: pre-flight finds SGLang, the preset starts it with the draft's flags, the
    run measures through it and result.json's section is null with the planted gauges."""
    import json
    from pathlib import Path

    from llem.testing.cli import run_tiny

    fake = tmp_path / "fake"
    (fake / "sglang").mkdir(parents=True)
    (fake / "sglang" / "__init__.py").write_text("")
    (fake / "sglang" / "launch_server.py").write_text(FAKE_LAUNCH_SERVER)
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.syspath_prepend(str(fake))  # pre-flight looks the package up in this process
    monkeypatch.setenv("PYTHONPATH", f"{fake}:{repo}")
    monkeypatch.setenv("FAKE_SGLANG_ARGV", str(tmp_path / "argv.json"))
    monkeypatch.setenv("FAKE_SGLANG_METRICS", SGLANG_METRICS % ("1.84", "0.21"))
    result = run_tiny(
        tiny_model_dir,
        tmp_path / "run",
        "+backend=server",
        "server.launch=sglang",
        "server.model=fake-model",
        "speculative=draft",
        f"speculative.draft_model={tiny_model_dir}",
        "speculative.num_tokens=3",
        "traffic.n_requests=2",
        "measurement.warmup=0",
    )
    assert result["status"] == "ok", result.get("error")
    argv = json.loads((tmp_path / "argv.json").read_text())
    at = argv.index("--speculative-algorithm")
    assert argv[at : at + 10] == [
        *("--speculative-algorithm", "STANDALONE"),
        *("--speculative-draft-model-path", str(tiny_model_dir)),
        *("--speculative-num-steps", "3"),
        *("--speculative-eagle-topk", "1"),
        *("--speculative-num-draft-tokens", "4"),
    ]
    assert result["speculative"] is None
    reason = result["null_reasons"]["speculative"]
    assert reason.startswith("speculative=draft: SGLang's /metrics counts no draft or accepted")
    assert "sglang:spec_accept_length 1.84 tokens per verification step" in reason
    assert "sglang:spec_accept_rate 0.21;" in reason

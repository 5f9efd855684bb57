"""``+backend=server server.launch=vllm`` for real, on a tiny random model, as a user runs it
(``python -m llem``): vLLM's real OpenAI server launched by llem once for a sweep over every
traffic kind, and the same workload run on the in-process vLLM engine.

- Each traffic kind is served: every point's output tokens are the server's usage and equal the
  server's own /metrics counter over the window; open-loop requests carry their scheduled send
  times, closed-loop ones none and never more in flight than ``traffic.max_concurrency``.
- The server is launched once for the five points (its launch arguments do not change), and no
  process of it is left after the sweep (counted by its model path, this test's own).
- The in-process engine and the server, greedy on the same prompts, agree on each request's
  output tokens and text (``generations.jsonl``): the two count tokens from different sources
  (the engine's token ids, the server's usage).

The traffic kinds are options of the sweep's own ``conf/traffic/`` (each kind with its own keys:
a grid of ``traffic=poisson,concurrency`` with ``traffic.rate_per_s`` would give the rate to the
closed loop too, which pre-flight refuses).

Marked ``vllm``: run it with the vLLM environment's interpreter (/work/main/.venv-vllm or
scripts/setup.sh --vllm); elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from llem.testing.cli import output, run_llem
from llem.testing.tinymodel import HEAD64, build_tiny_model
from tests.server.traffic_options import kinds, write_kind_options

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not importable here (its environment: scripts/setup.sh --vllm)",
    ),
]

MAX_TOKENS = 12
N_REQUESTS = 6
MAX_NUM_SEQS = 4
RATE_PER_S = 40
KINDS = kinds(RATE_PER_S)
WORKLOAD = (
    "model=hf",
    "model.dtype=float32",
    "dataset=synthetic",
    "dataset.input_tokens=16",
    f"traffic.n_requests={N_REQUESTS}",
    "decoder=greedy",
    f"decoder.max_new_tokens={MAX_TOKENS}",
    "measurement.energy=none",
    "measurement.warmup=0",
    "measurement.save_outputs=true",
)


def _server_pids(model: Path) -> set[int]:
    """Every running vLLM OpenAI server process of ``model`` (this test's own: the path is
    unique to it, so a server another test runs at the same time is not counted)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"vllm.entrypoints.openai.api_server" in argv and str(model).encode() in argv:
            found.add(int(entry.name))
    return found


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_traffic_kind_through_one_launched_vllm_server_agrees_with_the_engine(
    tmp_path: Path,
) -> None:
    """The server sweep over the five kinds, then the in-process run of the same workload (one
    test: the sweep's server and the engine start once, on one worker)."""
    model = build_tiny_model(tmp_path / "model", **HEAD64)
    sweep_kinds = write_kind_options(tmp_path, RATE_PER_S)
    proc = run_llem(
        "+backend=server",
        "server.launch=vllm",
        "server.ready_timeout_s=540",
        f"server.max_num_seqs={MAX_NUM_SEQS}",
        "+server.args.enforce_eager=true",
        "+server.args.max_model_len=256",
        f"model.name_or_path={model}",
        *WORKLOAD,
        sweep_kinds,
        multirun=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, output(proc)
    assert not _server_pids(model)  # every server process llem started is gone
    served = {}
    for path in tmp_path.glob("outputs/multirun/**/result.json"):
        result = json.loads(path.read_text())
        served[result["traffic"]["kind"]] = (result, path.parent)
    _check_each_kind(served)
    _check_launched_once(served)
    in_process = tmp_path / "in-process"
    proc = run_llem(
        "+backend=vllm",
        "vllm.enforce_eager=true",
        f"vllm.kv_cache_memory_bytes={64 * 2**20}",
        f"vllm.max_num_seqs={MAX_NUM_SEQS}",
        f"model.name_or_path={model}",
        *WORKLOAD,
        "traffic=offline",
        f"hydra.run.dir={in_process}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    engine = json.loads((in_process / "result.json").read_text())
    _check_agreement(served, (engine, in_process))


Served = dict[str, tuple[dict[str, Any], Path]]


def _check_each_kind(served: Served) -> None:
    """Each kind served, its counts the server's usage and equal to vLLM's /metrics counter."""
    assert set(served) == set(KINDS)
    for kind, (r, run_dir) in served.items():
        assert r["status"] == "ok", (kind, r.get("error"))
        s = r["server"]
        assert s["usage_completion_tokens"] == r["workload"]["output_tokens"] > 0
        # the server's own counter over the window, beside its usage
        assert s["metrics_source"] == "vllm", r["null_reasons"].get("server.metrics_source")
        assert s["generation_tokens"] == s["usage_completion_tokens"], kind
        assert s["prompt_tokens"] == s["usage_prompt_tokens"], kind
        # vllm:request_success_total grew by llem's requests alone: llem was the only client
        assert s["requests_finished"] == N_REQUESTS, kind
        assert r["validity"]["checks"]["server_load"] == "passed", r["validity"]["problems"]
        assert (run_dir / "server_metrics.csv").exists()
        if s["running_requests_max"] is None:  # the window was shorter than a poll interval
            why = r["null_reasons"]["server.running_requests_max"]
            assert why.startswith("no poll fell between the first request and the last answer")
        else:
            assert 0 <= s["running_requests_max"] <= MAX_NUM_SEQS  # sampled: may miss all
        rows = _lines(run_dir / "requests.jsonl")
        assert len(rows) == N_REQUESTS
        assert sum(row["output_tokens"] for row in rows) == s["usage_completion_tokens"]
        assert all(row["finish_s"] is not None and row["finish_s"] > row["sent_s"] for row in rows)
        if kind == "concurrency":
            assert all(row["scheduled_s"] is None for row in rows)
            assert r["concurrency"]["max"] <= KINDS["concurrency"]["max_concurrency"]
        else:
            assert all(row["scheduled_s"] is not None for row in rows), kind
            assert r["traffic"]["pacing_lateness_ms"] is not None, kind


def _check_launched_once(served: Served) -> None:
    """One launch for the five points (the launch arguments do not change)."""
    import vllm

    results = [r for r, _ in served.values()]
    assert sorted(r["lifecycle"]["model_reused"] for r in results) == [False] + [True] * 4
    (launched,) = [r["server"] for r in results if not r["lifecycle"]["model_reused"]]
    assert launched["launched"] is True and launched["version"] == vllm.__version__
    command = launched["command"]
    assert f"--max-num-seqs {MAX_NUM_SEQS}" in command and "--dtype float32" in command
    assert launched["launch_to_ready_s"] > 0
    print(f"\nvLLM server launch-to-ready: {launched['launch_to_ready_s']:.1f} s")


def _check_agreement(served: Served, in_process: tuple[dict[str, Any], Path]) -> None:
    """The engine and every point of the server agree on each request's tokens and text."""
    engine, engine_dir = in_process
    assert engine["status"] == "ok", engine.get("error")
    expected = {g["request"]: g for g in _lines(engine_dir / "generations.jsonl")}
    assert len(expected) == N_REQUESTS
    assert any(g["text"] for g in expected.values())  # texts to compare, not empty ones
    stopped = sum(g["output_tokens"] < MAX_TOKENS for g in expected.values())
    print(f"\nin-process vLLM: {stopped} of {N_REQUESTS} requests stopped at EOS before the limit")
    for kind, (r, run_dir) in served.items():
        got = {g["request"]: g for g in _lines(run_dir / "generations.jsonl")}
        assert {i: g["output_tokens"] for i, g in got.items()} == {
            i: g["output_tokens"] for i, g in expected.items()
        }, kind
        assert {i: g["text"] for i, g in got.items()} == {
            i: g["text"] for i, g in expected.items()
        }, kind
        assert r["workload"]["output_tokens"] == engine["workload"]["output_tokens"], kind
        assert r["workload"]["input_tokens"] == engine["workload"]["input_tokens"], kind

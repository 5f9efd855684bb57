"""``+backend=server server.launch=llamacpp`` for real: llama-cpp-python's OpenAI server launched
by llem on the default model's GGUF file, as a user runs it (``python -m llem``).

- A sweep over a launch argument (``+server.args.n_ctx``) and every traffic kind (options of the
  sweep's own ``conf/traffic/``, each kind with its own keys): the server starts once per launch
  argument and is kept across the points that share it; each point's output tokens are the
  server's usage (``min_new_tokens`` = ``max_new_tokens``: exact lengths), its answers came whole
  (llama-cpp-python's stream carries no usage) with the per-token figures null and the reason,
  open-loop requests carry their scheduled send times and closed-loop ones none, and every server
  process is gone after the sweep.
- SIGTERM to a run while the server is up: the server process is gone after (checked by pid).

Marked ``llamacpp``: it needs ``llama-cpp-python[server]`` (built from its sdist, see
docs/engines.md); elsewhere it is skipped with the reason, except where LLEM_NEED_LLAMACPP is set
(CI's llama.cpp part), where a missing package fails it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from llem.backends.server.client import WHOLE_ANSWERS
from llem.testing.cli import llem_command, llem_env, output, run_llem
from tests.server.traffic_options import kinds, write_kind_options

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None and not os.environ.get("LLEM_NEED_LLAMACPP"),
        reason="llama_cpp is not importable here: "
        "bash scripts/build_llamacpp.sh ~/.cache/llem/wheels .venv",
    ),
]

N_REQUESTS = 4
BASE = (
    "+backend=server",
    "server.launch=llamacpp",
    "dataset=synthetic",
    "dataset.input_tokens=16",
    "measurement.energy=none",
    "measurement.warmup=0",
)


def _server_pids() -> dict[int, str]:
    """Every running llama_cpp.server process: pid -> its command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        if "llama_cpp.server" in line:
            found[int(entry.name)] = line
    return found


def _results(root: Path) -> list[dict[str, Any]]:
    paths = sorted(root.glob("outputs/multirun/**/result.json"))
    return [json.loads(p.read_text()) for p in paths]


RATE_PER_S = 8
KINDS = kinds(RATE_PER_S)
NEW_TOKENS = 8


def test_a_sweep_launches_per_launch_argument_serves_every_traffic_kind_and_stops_every_server(
    tmp_path: Path,
) -> None:
    import llama_cpp

    sweep_kinds = write_kind_options(tmp_path, RATE_PER_S)
    before = set(_server_pids())
    proc = run_llem(
        *BASE,
        f"decoder.max_new_tokens={NEW_TOKENS}",
        "decoder.min_new_tokens=${decoder.max_new_tokens}",
        sweep_kinds,
        f"traffic.n_requests={N_REQUESTS}",
        "+server.args.n_ctx=512,1024",
        multirun=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, output(proc)
    results = _results(tmp_path)
    assert len(results) == 2 * len(KINDS)
    assert {r["traffic"]["kind"] for r in results} == set(KINDS)
    for r in results:
        assert r["status"] == "ok", r.get("error")
        assert r["workload"]["output_tokens"] == N_REQUESTS * NEW_TOKENS  # the usage, exact
        s = r["server"]
        assert s["launched"] and s["version"] == llama_cpp.__version__
        assert s["usage_completion_tokens"] == N_REQUESTS * NEW_TOKENS
        assert s["launch_to_ready_s"] > 0 and "llama_cpp.server" in s["command"]
        assert r["latency"]["e2e_ms"]["p50"] > 0
        assert r["null_reasons"]["latency.ttft_ms"] == WHOLE_ANSWERS
        assert "404" in r["null_reasons"]["server.metrics_source"]  # no /metrics: said so
        kind = r["traffic"]["kind"]
        assert (r["traffic"]["pacing_lateness_ms"] is None) == (kind == "concurrency"), kind
        if kind == "concurrency":
            assert r["concurrency"]["max"] <= KINDS["concurrency"]["max_concurrency"]
    # one launch per n_ctx, kept for the other points of its group
    commands = {r["server"]["command"] for r in results}
    assert len(commands) == 2 and {"--n_ctx 512" in c for c in commands} == {True, False}
    reused = sorted(r["lifecycle"]["model_reused"] for r in results)
    assert reused == [False] * 2 + [True] * (2 * len(KINDS) - 2)
    ready_s = sorted({r["server"]["launch_to_ready_s"] for r in results})
    print(f"\nllama.cpp server launch-to-ready (s): {ready_s}")
    assert set(_server_pids()) <= before  # every server llem started is gone


def test_sigterm_to_a_run_stops_its_llamacpp_server(tmp_path: Path) -> None:
    before = set(_server_pids())
    run_dir = tmp_path / "run"
    command = llem_command(
        *BASE,
        "traffic=offline",
        "traffic.n_requests=400",
        "decoder.max_new_tokens=64",
        f"hydra.run.dir={run_dir}",
    )
    out = tmp_path / "out.txt"  # a file, not a pipe: a full pipe would block the run's writes
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            command, env=llem_env(), cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline, started = time.monotonic() + 240, {}
        while not started and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            log = run_dir / "llem.log"
            if log.exists() and "server ready" in log.read_text():
                started = {p: c for p, c in _server_pids().items() if p not in before}
        assert started, out.read_text(errors="replace")[-4000:]
        (pid,) = started
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    said = out.read_text(errors="replace")
    assert pid not in _server_pids(), said[-4000:]
    assert proc.returncode == 143  # SIGTERM's exit
    # the loop stopped cleanly: every request's task unwound, none left pending
    assert "Task was destroyed" not in said and "GeneratorExit" not in said, said[-4000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed"
    assert result["error"]["message"] == "terminated by SIGTERM (exit 143)"

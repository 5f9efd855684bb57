"""Real vLLM engines on the CPU: a whole run, a sweep that rebuilds and reuses the engine, and
pre-flight. Marked ``vllm``: skipped with the reason where vllm is not importable."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from vllm_backend.vllm_helpers import (
    SMALL_ENGINE,
    output,
    read_json,
    run_llem,
    sockets_under,
    sweep_results,
    traffic_options,
)

from llem.result import read_requests, read_steps

pytestmark = pytest.mark.vllm

N_PROMPTS, N_TOKENS = 4, 8


def _check_steps(run_dir: Path, r: dict[str, Any]) -> None:
    """vLLM's steps against the run's own counts: every prompt token prefilled once (no prefix
    cache), every output token produced once, each request's share adding up to its tokens;
    inside the window, in order, one step at a time."""
    steps = read_steps(run_dir)
    requests = read_requests(run_dir)
    assert steps and r["concurrency"]["engine_step_clock"].startswith("time.perf_counter")
    assert sum(s.prefill_tokens or 0 for s in steps) == r["workload"]["input_tokens"]
    assert sum(s.decode_tokens or 0 for s in steps) == r["workload"]["output_tokens"]
    made: dict[int, int] = {}
    prefill: dict[int, int] = {}
    for s in steps:
        assert s.shares is not None
        for x in s.shares:
            made[x.request_id] = made.get(x.request_id, 0) + x.decode_tokens
            prefill[x.request_id] = prefill.get(x.request_id, 0) + x.prefill_tokens
    assert made == {q.request_id: q.output_tokens for q in requests}
    assert prefill == {q.request_id: q.input_tokens for q in requests}
    window = r["energy"]["window_s"]
    assert all(s.start_s is not None and 0 <= s.start_s <= s.end_s <= window for s in steps)
    assert all(a.end_s <= (b.start_s or 0) + 1e-6 for a, b in zip(steps, steps[1:], strict=False))


@pytest.mark.engine_process  # the core's own process leaves no socket behind
def test_run_writes_a_complete_vllm_result(
    head64_model_dir: Path, tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    temporary = short_tmp  # the run's temporary directory: no socket of vLLM's left in it
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.delenv("VLLM_RPC_BASE_PATH", raising=False)
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        f"dataset.n_prompts={N_PROMPTS}",
        f"decoder.max_new_tokens={N_TOKENS}",
        f"decoder.min_new_tokens={N_TOKENS}",
        "vllm.max_num_seqs=2",
        *SMALL_ENGINE,
        f"hydra.run.dir={run_dir}",
    )
    assert proc.returncode == 0, output(proc)
    assert not sockets_under(temporary), sockets_under(temporary)
    r = read_json(run_dir / "result.json")
    assert r["status"] == "ok" and r["backend"] == "vllm" and r["device"] == "cpu"
    w = r["workload"]
    assert w["requests"] == N_PROMPTS
    assert w["output_tokens"] == N_PROMPTS * N_TOKENS  # exact: min_new_tokens = max_new_tokens
    assert w["batch_size"] == 2  # workload.batch_size is vllm.max_num_seqs
    lat = r["latency"]
    assert lat["ttft_ms"]["p50"] > 0 and lat["itl_ms"]["p50"] > 0
    # offline generate hands every prompt over at once: TTFT includes the wait in the queue
    assert lat["ttft_origin"] == "all prompts at once"
    # At most 2 sequences at a time: the last two requests get their first token only after the
    # first two finished, so per-request TTFT spreads by at least a request's decode time.
    assert lat["ttft_ms"]["p99"] - lat["ttft_ms"]["p50"] > (N_TOKENS - 1) * lat["itl_ms"]["p50"] / 2
    assert r["throughput"]["output_tokens_per_s"] > 0
    assert r["lifecycle"]["load_kwargs"]["max_num_seqs"] == 2
    assert r["compute"]["flops_estimate"] > 0
    # the engine lives in other processes: no stand-in memory figures from this one
    assert r["memory"]["peak_host_rss_mb"] is None
    reason = r["null_reasons"]["memory.peak_host_rss_mb"]
    assert reason.startswith("the vLLM engine runs in its own processes")
    assert "the engine core runs in its own process" in r["concurrency"]["engine_step_clock"]
    assert "result:" in proc.stdout
    # prefix caching off by default: the warm-up ran the same prompts, none of them hit a cache
    assert r["lifecycle"]["prefix_caching"] is False
    assert r["lifecycle"]["prefix_cache_hit_rate"] == 0.0
    # the offline engine's steps, as llem stepped it
    _check_steps(run_dir, r)
    assert r["concurrency"]["engine_running_max"] == 2


def test_prefix_caching_on_request_is_recorded_with_the_window_hit_rate(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    """With vllm.enable_prefix_caching=true the warm-up fills the cache with the very prompts the
    window runs: the result says so (128-token prompts, 32-token blocks: 3 of 4 blocks hit)."""
    run_dir = tmp_path / "run"
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        "dataset=synthetic",
        "dataset.n_prompts=2",
        "dataset.input_tokens=128",
        "decoder.max_new_tokens=2",
        "vllm.enable_prefix_caching=true",
        "vllm.block_size=32",
        *SMALL_ENGINE,
        f"hydra.run.dir={run_dir}",
    )
    assert proc.returncode == 0, output(proc)
    life = read_json(run_dir / "result.json")["lifecycle"]
    assert life["prefix_caching"] is True
    assert life["prefix_cache_hit_rate"] >= 0.5


def test_sweep_rebuilds_the_engine_for_max_num_seqs_and_reuses_it_across_decoders(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    sweep = tmp_path / "sweep"
    proc = run_llem(
        "--multirun",
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        "dataset.n_prompts=4",
        "measurement.warmup=0",
        "vllm.max_num_seqs=1,4",
        "decoder.max_new_tokens=4,6",
        *SMALL_ENGINE,
        f"hydra.sweep.dir={sweep}",
    )
    assert proc.returncode == 0, output(proc)
    results = [read_json(sweep / str(i) / "result.json") for i in range(4)]
    assert [r["status"] for r in results] == ["ok"] * 4
    by_seqs = {}
    for r in results:
        by_seqs.setdefault(r["workload"]["batch_size"], []).append(r["lifecycle"]["model_reused"])
    # one engine per max_num_seqs, kept across the decoder change
    assert {k: sorted(v) for k, v in by_seqs.items()} == {1: [False, True], 4: [False, True]}
    with open(sweep / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {row["backend"] for row in rows} == {"vllm"}
    assert sorted(row["vllm.max_num_seqs"] for row in rows) == ["1", "1", "4", "4"]


def test_bad_vllm_knobs_exit_2_before_anything_runs(tmp_path: Path) -> None:
    run_dir = tmp_path / "never"
    proc = run_llem(
        "+backend=vllm",
        "vllm.gpu_memory_utilization=1.5",
        "pytorch.batch_size=4",
        "quantization=bnb-4bit",
        f"hydra.run.dir={run_dir}",
        timeout=120,
    )
    assert proc.returncode == 2, output(proc)
    assert "vllm.gpu_memory_utilization=1.5" in proc.stderr
    assert "vllm.max_num_seqs" in proc.stderr  # pytorch.batch_size's vLLM equivalent
    assert "vllm.quantization=bitsandbytes" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not run_dir.exists()


def test_preflight_reports_every_vllm_problem_before_an_engine_starts(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "never"
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",  # head size 8
        "vllm.swap_space=4",  # not an engine argument of vLLM 0.32
        "+vllm.engine_kwargs.max_num_seqz=4",
        f"hydra.run.dir={run_dir}",
        timeout=300,
    )
    assert proc.returncode == 3, output(proc)
    assert "3 pre-flight checks failed" in proc.stderr
    assert "head size 8" in proc.stderr
    assert "vllm.swap_space=4.0" in proc.stderr
    assert "vllm.engine_kwargs.max_num_seqz" in proc.stderr
    assert not (run_dir / "result.json").exists()


# Each served kind a traffic option of the test's own conf/traffic/ (its own keys), all four
# served by one llem process: the engine's load key does not depend on the traffic.
SERVED = {
    "poisson20": {"kind": "poisson", "rate_per_s": 20},
    "closed2": {"kind": "concurrency", "max_concurrency": 2},
    "gamma20": {"kind": "gamma", "rate_per_s": 20, "burstiness": 0.5},
    "constant20": {"kind": "constant", "rate_per_s": 20},
}


def test_a_served_vllm_sweep_writes_each_points_requests_and_serving_sections(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    """The whole CLI path of a served workload on vLLM's AsyncLLM, for every traffic kind:
    schedule, serve inside the window, the serving sections and requests.jsonl; one engine,
    started for the first point and kept for the other three."""
    sweep = tmp_path / "sweep"
    n_requests = 6
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        f"dataset.n_prompts={N_PROMPTS}",
        f"decoder.max_new_tokens={N_TOKENS}",
        f"decoder.min_new_tokens={N_TOKENS}",
        "vllm.max_num_seqs=2",
        *SMALL_ENGINE,
        traffic_options(tmp_path, SERVED),
        f"traffic.n_requests={n_requests}",
        "slo.ttft_ms=60000",
        f"hydra.sweep.dir={sweep}",
        multirun=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    runs = sweep_results(sweep, len(SERVED))
    kinds = [keys["kind"] for keys in SERVED.values()]
    assert [r["traffic"]["kind"] for _, r in runs] == kinds
    assert [r["lifecycle"]["model_reused"] for _, r in runs] == [False, True, True, True]
    for run_dir, r in runs:
        kind = r["traffic"]["kind"]
        assert r["status"] == "ok" and r["workload"]["requests"] == n_requests, kind
        assert r["workload"]["output_tokens"] == n_requests * N_TOKENS
        assert r["latency"]["ttft_origin"] == "actual send"
        assert r["traffic"]["n_requests"] == n_requests
        assert r["concurrency"]["max"] >= 1 and r["goodput"]["fraction"] == 1.0
        rows = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
        assert [row["output_tokens"] for row in rows] == [N_TOKENS] * n_requests
        assert all(row["first_token_s"] <= row["finish_s"] for row in rows)
        if kind == "concurrency":  # closed loop: at most max_concurrency in flight
            assert r["concurrency"]["max"] <= 2
        # vLLM exposes its steps: steps.csv, and its running batch never above max_num_seqs
        steps = read_steps(run_dir)
        assert steps and max(s.running for s in steps) <= 2, kind
        assert 1 <= r["concurrency"]["engine_running_max"] <= 2
        _check_steps(run_dir, r)


CHUNKED = {
    "at_once": {"kind": "offline"},
    "closed2": {"kind": "concurrency", "max_concurrency": 2, "n_requests": 2},
}


def test_chunked_prefill_lands_in_the_steps_that_computed_it_and_texts_are_saved(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    """Two 160-token prompts through a 64-token step budget: each prompt is prefilled in chunks
    of at most 64 tokens, in successive steps before (and with) its first output, and its chunks
    add up to its prompt; measurement.save_outputs=true writes every request's text."""
    sweep = tmp_path / "sweep"
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        "dataset=synthetic",
        "dataset.n_prompts=2",
        "dataset.input_tokens=160",
        "decoder.max_new_tokens=4",
        "decoder.min_new_tokens=4",
        "vllm.max_num_seqs=2",
        "vllm.enable_chunked_prefill=true",
        "vllm.max_num_batched_tokens=64",
        "measurement.save_outputs=true",
        *SMALL_ENGINE,
        traffic_options(tmp_path, CHUNKED),
        f"hydra.sweep.dir={sweep}",
        multirun=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    runs = sweep_results(sweep, len(CHUNKED))
    assert [r["traffic"]["kind"] for _, r in runs] == ["offline", "concurrency"]
    # offline generate and served AsyncLLM are engines of their own
    assert [r["lifecycle"]["model_reused"] for _, r in runs] == [False, False]
    # the offline core ran in llem's process here (conftest), the served one in its own: each
    # result says where
    offline, served = (r for _, r in runs)
    assert (
        "llem's process (VLLM_ENABLE_V1_MULTIPROCESSING=0)"
        in (offline["concurrency"]["engine_step_clock"])
    )
    rss = "memory.peak_host_rss_mb"
    assert offline["null_reasons"][rss].startswith("the vLLM engine's core runs in llem's process")
    assert served["null_reasons"][rss].startswith("the vLLM engine runs in its own processes")
    for run_dir, r in runs:
        _check_chunks(run_dir, r)


def _check_chunks(run_dir: Path, r: dict[str, Any]) -> None:
    """One chunked-prefill run's steps and saved texts."""
    assert "placed in the steps that computed them" in r["concurrency"]["engine_step_clock"]
    _check_steps(run_dir, r)
    steps = read_steps(run_dir)
    for q in read_requests(run_dir):
        chunks = [
            (k, x.prefill_tokens, x.decode_tokens)
            for k, s in enumerate(steps)
            for x in s.shares or ()
            if x.request_id == q.request_id and x.prefill_tokens
        ]
        assert len(chunks) >= 3 and all(n <= 64 for _, n, _ in chunks), chunks
        assert [k for k, _, _ in chunks] == list(range(chunks[0][0], chunks[-1][0] + 1))
        assert [d for _, _, d in chunks] == [0] * (len(chunks) - 1) + [1]
        assert sum(n for _, n, _ in chunks) == q.input_tokens
    lines = [json.loads(x) for x in (run_dir / "generations.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and all(isinstance(x["text"], str) and x["text"] for x in lines)


def test_sampling_repeats_differ_and_per_request_seeds_repeat_the_same_text(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    """By default no request carries a seed: the engine's own seed (seed + repeat) keeps repeats
    distinct, and the result says how sampling was seeded and that the text repeats only under
    the same batching. With vllm.per_request_seed=true, repeat 0 run twice writes the same texts
    whatever its engine ran before."""
    sweep = tmp_path / "sweep"
    proc = run_llem(
        "--multirun",
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        "dataset.n_prompts=2",
        "decoder=creative",
        "decoder.max_new_tokens=8",
        "decoder.min_new_tokens=8",
        "seed=5",
        "vllm.per_request_seed=false,true",
        "repeat=0,1,0",
        "measurement.save_outputs=true",
        *SMALL_ENGINE,
        f"hydra.sweep.dir={sweep}",
    )
    assert proc.returncode == 0, output(proc)
    runs = {}
    for job in sorted(p for p in sweep.iterdir() if (p / "result.json").exists()):
        r = read_json(job / "result.json")
        lines = (job / "generations.jsonl").read_text().splitlines()
        texts = [json.loads(x)["text"] for x in lines]
        assert len(texts) == 2 and all(isinstance(x, str) and x for x in texts)
        key = (r["config"]["vllm"]["per_request_seed"], r["config"]["repeat"])
        runs.setdefault(key, []).append((texts, r["lifecycle"]["load_kwargs"]))
    assert len(runs) == 4
    (t0, kw0), (t1, kw1) = runs[(False, 0)][0], runs[(False, 1)][0]
    assert t0 != t1 and [kw0["seed"], kw1["seed"]] == [5, 6]
    assert "no per-request generators" in kw0["llem_sampling_seed"]
    first, again = runs[(True, 0)]
    assert first[0] == again[0] != runs[(True, 1)][0][0]
    assert "unless vllm.per_request_seed=true" in first[1]["llem_sampling_seed"]

"""The search sweeper on a real vLLM engine (CPU), on a model without its weights: the trials are
vLLM runs of SmolLM2-135M's architecture with random weights (``load_format="dummy"`` over llem's
config.json + tokenizer directory, every request running to max_new_tokens); the engine is built
once and kept across trials that differ only in the decoder, and search.json judges them. One
engine start serves both subjects (vLLM engines are the slowest part of CI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vllm_backend.vllm_helpers import SMALL_ENGINE, output, read_json, run_llem

pytestmark = pytest.mark.vllm

N_PROMPTS = 3


def _random_weights_run(run_dir: Path, r: dict[str, Any], n_tokens: int) -> None:
    assert r["status"] == "ok" and r["backend"] == "vllm" and r["weights"] == "random"
    assert r["model"] == "smollm2-135m"
    kwargs = r["lifecycle"]["load_kwargs"]
    assert kwargs["load_format"] == "dummy"
    assert kwargs["tokenizer"].startswith(("the default model's", "synthetic"))
    source = Path(r["lifecycle"]["model_source"])
    assert (source / "config.json").is_file() and not list(source.glob("*.safetensors"))
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    assert [json.loads(x)["output_tokens"] for x in lines] == [n_tokens] * N_PROMPTS
    assert any("stand-in" in c for c in r["validity"]["conditions"])


def test_a_search_runs_vllm_trials_on_random_weights_and_keeps_the_engine(tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    sweep = tmp_path / "search"
    proc = run_llem(
        "--multirun",
        "hydra/sweeper=llem_search",
        "hydra.sweeper.objective=throughput.output_tokens_per_s",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.constraints=['latency.ttft_ms.p90 <= 600000']",
        "hydra.sweeper.budget=2",
        "+backend=vllm",
        "model.weights=random",
        "model.architecture=smollm2-135m",
        f"dataset.n_prompts={N_PROMPTS}",
        "measurement.warmup=0",
        "vllm.max_num_seqs=2",
        "vllm.max_model_len=512",
        "decoder.max_new_tokens=4,6,8",
        *SMALL_ENGINE,
        "~hydra.callbacks.report",
        f"hydra.sweep.dir={sweep}",
    )
    assert proc.returncode == 0, output(proc)
    record = json.loads((sweep / "search.json").read_text())
    trials = record["trials"]
    assert len(trials) == 2 and record["state"] == "finished"
    results = [read_json(sweep / t["dir"] / "result.json") for t in trials]
    assert [r["lifecycle"]["model_reused"] for r in results] == [False, True]
    for t, r in zip(trials, results, strict=True):
        n_tokens = int(t["knobs"]["decoder.max_new_tokens"])
        _random_weights_run(sweep / t["dir"], r, n_tokens)
        assert r["config"]["decoder"]["max_new_tokens"] == n_tokens
        assert t["feasible"]
        assert t["objective"] == pytest.approx(r["throughput"]["output_tokens_per_s"])
    best = next(t for t in trials if t["number"] == record["best"])
    assert best["objective"] == max(t["objective"] for t in trials)

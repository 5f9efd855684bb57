"""The search sweeper on a real vLLM engine (CPU): the trials are vLLM runs, the engine is built
once and kept across trials that differ only in the decoder, and search.json judges them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_backend.vllm_helpers import SMALL_ENGINE, output, read_json, run_llem

pytestmark = pytest.mark.vllm
pytest.importorskip("optuna")


def test_a_search_runs_vllm_trials_and_keeps_the_engine(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    sweep = tmp_path / "search"
    proc = run_llem(
        "--multirun",
        "hydra/sweeper=llem_search",
        "hydra.sweeper.objective=throughput.output_tokens_per_s",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.constraints=['latency.ttft_ms.p90 <= 600000']",
        "hydra.sweeper.budget=2",
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        "dataset.n_prompts=4",
        "measurement.warmup=0",
        "vllm.max_num_seqs=4",
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
    assert [r["backend"] for r in results] == ["vllm", "vllm"]
    assert [r["lifecycle"]["model_reused"] for r in results] == [False, True]
    for t, r in zip(trials, results, strict=True):
        assert t["feasible"] and t["objective"] == pytest.approx(
            r["throughput"]["output_tokens_per_s"]
        )
        assert r["config"]["decoder"]["max_new_tokens"] == int(t["knobs"]["decoder.max_new_tokens"])
    best = next(t for t in trials if t["number"] == record["best"])
    assert best["objective"] == max(t["objective"] for t in trials)

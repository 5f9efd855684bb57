"""Random-weight runs end to end: through the command line on the CPU for the shipped
architectures this machine runs, from a local config.json, and in the report beside pretrained
weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llem.config.architectures import RANDOM_POWER_WARNING
from llem.report.build import build_report
from llem.testing.cli import output, run_tiny
from llem.testing.forked_cli import run_llem

MAX_NEW_TOKENS = 5


def _run(tmp_path: Path, *overrides: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Run the CLI on the CPU without energy; return result.json, requests.jsonl and stderr."""
    run_dir = tmp_path / "run"
    proc = run_llem(
        "model.weights=random",
        "device=cpu",
        "measurement.energy=none",
        "dataset.n_prompts=3",
        f"decoder.max_new_tokens={MAX_NEW_TOKENS}",
        f"hydra.run.dir={run_dir}",
        *overrides,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, output(proc)
    result = json.loads((run_dir / "result.json").read_text())
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    return result, [json.loads(x) for x in lines], proc.stdout + proc.stderr


def _check_random_run(result: dict[str, Any], requests: list[dict[str, Any]], log: str) -> None:
    assert result["status"] == "ok" and result["weights"] == "random"
    assert [r["output_tokens"] for r in requests] == [MAX_NEW_TOKENS] * len(requests)
    assert result["workload"]["output_tokens"] == MAX_NEW_TOKENS * result["workload"]["requests"]
    conditions = result["validity"]["conditions"]
    assert RANDOM_POWER_WARNING in conditions
    assert any(c.startswith("random weights: output lengths are forced") for c in conditions)
    assert RANDOM_POWER_WARNING in log  # said in the run's log too
    assert result["lifecycle"]["load_kwargs"]["weights"] == "random"


@pytest.mark.slow
def test_smollm2_135m_with_random_weights_through_the_cli(tmp_path: Path):
    result, requests, log = _run(tmp_path, "model.architecture=smollm2-135m")
    _check_random_run(result, requests, log)
    assert result["model"] == "smollm2-135m"
    assert result["dtype"] == "bfloat16"  # the published checkpoint's dtype
    kwargs = result["lifecycle"]["load_kwargs"]
    assert kwargs["tokenizer"] == "the default model's (SmolLM2-135M-Instruct.Q4_1.gguf)"
    assert f"llem: smollm2-135m on cpu (bfloat16): 3 requests, {3 * MAX_NEW_TOKENS}" in log


@pytest.mark.slow
def test_llama_3_2_1b_with_random_weights_through_the_cli(tmp_path: Path):
    # float32 and no warm-up pass: the CPU's bfloat16 kernels ran this 1.2 B model at 0.4 tokens/s
    # (49.5 s against 27.5 s alone); the bfloat16 path is the 135M test's
    result, requests, log = _run(
        tmp_path,
        "model.architecture=llama-3.2-1b",
        "dataset.n_prompts=2",
        "model.dtype=float32",
        "measurement.warmup=0",
    )
    _check_random_run(result, requests, log)
    assert result["model"] == "llama-3.2-1b" and result["dtype"] == "float32"


@pytest.mark.slow
def test_a_local_config_json_without_weights_or_tokenizer(tmp_path: Path):
    from llem.testing.tinymodel import tiny_llama_config

    model_dir = tmp_path / "config-only"
    model_dir.mkdir()
    tiny_llama_config(vocab_size=1000).to_json_file(model_dir / "config.json")
    result, requests, log = _run(tmp_path, "model=hf", f"model.name_or_path={model_dir}")
    _check_random_run(result, requests, log)
    # the default model's tokenizer has 49152 tokens, more than this vocabulary: a synthetic one
    assert result["lifecycle"]["load_kwargs"]["tokenizer"].startswith("synthetic")
    assert result["model"] == str(model_dir)


@pytest.mark.slow
def test_the_report_never_pools_random_with_pretrained_weights(tmp_path: Path, tiny_model_dir):
    sweep = tmp_path / "sweep"
    for k, extra in enumerate([[], ["model.weights=random"]]):
        run_tiny(tiny_model_dir, sweep / str(k), "dataset.n_prompts=2", *extra)
    random = json.loads((sweep / "1" / "result.json").read_text())
    assert random["weights"] == "random"
    assert random["lifecycle"]["load_kwargs"]["tokenizer"] == f"{tiny_model_dir}'s own"
    report = build_report([sweep], plots=False, width=400)
    summary = report.summary
    assert len(summary) == 2, summary  # one row per kind of weights
    frame = report.runs.frame
    for config_hash in summary["config_hash"]:
        kinds = set(frame.loc[frame["config_hash"] == config_hash, "weights"])
        assert len(kinds) == 1, frame[["config_hash", "weights"]]
    assert "1 run with random weights" in report.text
    assert "stand-in" in report.text

"""Random weights on vLLM: ``load_format="dummy"`` over llem's config.json + tokenizer directory,
every request running to max_new_tokens. Marked ``vllm``: skipped where vllm is not importable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_backend.vllm_helpers import SMALL_ENGINE, output, read_json, run_llem

pytestmark = pytest.mark.vllm

N_PROMPTS, N_TOKENS = 3, 6


def test_smollm2_135m_with_random_weights_on_vllm(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = run_llem(
        "+backend=vllm",
        "model.weights=random",
        "model.architecture=smollm2-135m",
        f"dataset.n_prompts={N_PROMPTS}",
        f"decoder.max_new_tokens={N_TOKENS}",
        "vllm.max_num_seqs=2",
        "vllm.max_model_len=512",
        *SMALL_ENGINE,
        f"hydra.run.dir={run_dir}",
    )
    assert proc.returncode == 0, output(proc)
    r = read_json(run_dir / "result.json")
    assert r["status"] == "ok" and r["backend"] == "vllm" and r["weights"] == "random"
    assert r["model"] == "smollm2-135m"
    kwargs = r["lifecycle"]["load_kwargs"]
    assert kwargs["load_format"] == "dummy"
    assert kwargs["tokenizer"].startswith(("the default model's", "synthetic"))
    source = Path(r["lifecycle"]["model_source"])
    assert (source / "config.json").is_file() and not list(source.glob("*.safetensors"))
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    assert [json.loads(x)["output_tokens"] for x in lines] == [N_TOKENS] * N_PROMPTS
    assert any("stand-in" in c for c in r["validity"]["conditions"])

"""Scored runs through vLLM, offline (generate) and served (AsyncLLM): every request's text
reaches the scorer by its own prompt. Planted truth: even prompts' references match any answer
(``[\\s\\S]*``), odd prompts' match none (``(?!)``), so exactly the even prompts are right, and an
answer that never reached the scorer would count as wrong. Marked ``vllm``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_backend.vllm_helpers import SMALL_ENGINE, output, read_json, run_llem

from llem.result import read_requests

pytestmark = pytest.mark.vllm

ANY, NONE = r"[\s\S]*", r"(?!)"


@pytest.mark.parametrize(
    "traffic",
    [[], ["traffic=concurrency", "traffic.max_concurrency=2", "traffic.n_requests=6"]],
    ids=["offline", "served"],
)
def test_each_vllm_answer_is_judged_against_its_own_prompt(
    head64_model_dir: Path,
    tmp_path: Path,
    short_tmp: Path,
    traffic: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TMPDIR", str(short_tmp))
    data = tmp_path / "task.jsonl"
    rows = [
        {"prompt": f"Say {w}.", "reference": ANY if i % 2 == 0 else NONE}
        for i, w in enumerate(["one", "two", "three", "four"])
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        "dataset=jsonl",
        f"dataset.path={data}",
        "dataset.scorer=regex",
        "decoder.max_new_tokens=4",
        "vllm.max_num_seqs=2",
        *SMALL_ENGINE,
        *traffic,
        f"hydra.run.dir={run_dir}",
    )
    assert proc.returncode == 0, output(proc)
    q = read_json(run_dir / "result.json")["quality"]
    records = read_requests(run_dir)
    assert q["n_answers"] == len(records) == (6 if traffic else 4)
    assert q["n_correct"] == sum(r.prompt_index % 2 == 0 for r in records)
    for r in records:
        assert r.correct == (r.prompt_index % 2 == 0), r

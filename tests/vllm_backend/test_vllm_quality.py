"""Scored runs through vLLM, offline (generate) and served (AsyncLLM): every request's text
reaches the scorer by its own prompt. Planted truth: even prompts' references match any answer
(``[\\s\\S]*``), odd prompts' match none (``(?!)``), so exactly the even prompts are right, and an
answer that never reached the scorer would count as wrong. Marked ``vllm``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_backend.vllm_helpers import (
    SMALL_ENGINE,
    output,
    run_llem,
    sweep_results,
    traffic_options,
)

from llem.result import read_requests

pytestmark = pytest.mark.vllm

ANY, NONE = r"[\s\S]*", r"(?!)"


# Offline (generate) and served (AsyncLLM), each a traffic option of the test's own conf/traffic/:
# one llem process runs both.
TRAFFIC = {
    "at_once": {"kind": "offline"},
    "closed2": {"kind": "concurrency", "max_concurrency": 2, "n_requests": 6},
}


def test_each_vllm_answer_is_judged_against_its_own_prompt(
    head64_model_dir: Path, tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(short_tmp))
    data = tmp_path / "task.jsonl"
    rows = [
        {"prompt": f"Say {w}.", "reference": ANY if i % 2 == 0 else NONE}
        for i, w in enumerate(["one", "two", "three", "four"])
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sweep = tmp_path / "sweep"
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
        traffic_options(tmp_path, TRAFFIC),
        f"hydra.sweep.dir={sweep}",
        multirun=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    runs = sweep_results(sweep, len(TRAFFIC))
    assert [r["traffic"]["kind"] for _, r in runs] == ["offline", "concurrency"]
    for run_dir, r in runs:
        q = r["quality"]
        records = read_requests(run_dir)
        assert q["n_answers"] == len(records) == (4 if r["traffic"]["kind"] == "offline" else 6)
        assert q["n_correct"] == sum(x.prompt_index % 2 == 0 for x in records)
        for x in records:
            assert x.correct == (x.prompt_index % 2 == 0), x

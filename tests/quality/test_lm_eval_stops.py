"""A real lm-eval task's stop strings (its ``until`` and the tokenizer's EOS) reach the engine,
and the generated tokens end at the stop: on the local task of tests/quality/data, with its
``until`` replaced by a stop string planted in the tiny random model's greedy continuation of the
task's first prompt (tests/backends/stop_planting.py), so the truth is known before the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lm_eval")

from backends.stop_planting import greedy, planted_stop  # noqa: E402

from llem.backends import create_backend  # noqa: E402
from llem.config.schema import ExperimentConfig  # noqa: E402
from llem.quality.lm_eval_task import load_lm_eval_task  # noqa: E402
from llem.testing.cli import output, run_llem  # noqa: E402

DATA = Path(__file__).parent / "data"
MAX_NEW = 16
TASK = "llem_arith_stop"


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    import datasets.config

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("hf"))


def _task_dir(directory: Path, until: list[str]) -> str:
    """llem_arith's yaml as the task ``TASK`` whose ``until`` is ``until``."""
    text = (DATA / "llem_arith.yaml").read_text().replace("DATA_DIR", str(DATA))
    text = text.replace("task: llem_arith", f"task: {TASK}")
    text = text.replace(
        '    - "\\n"\n    - "Question:"\n', "".join(f"    - {json.dumps(s)}\n" for s in until)
    )
    assert all(json.dumps(s) in text for s in until)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{TASK}.yaml").write_text(text)
    return str(directory)


def _exp(model_dir: Path) -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.model.name_or_path = str(model_dir)
    exp.backend = "pytorch"
    exp.decoder.max_new_tokens = MAX_NEW
    exp.measurement.save_outputs = True
    return exp


@pytest.fixture(scope="module")
def planted(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny model loaded, the task's first prompt, and a stop string its greedy continuation
    completes (before any EOS) with the tokens up to and including it."""
    backend = create_backend(_exp(tiny_model_dir))
    loaded = backend.load("cpu")
    tok = loaded.tokenizer
    probe = _task_dir(tmp_path_factory.mktemp("probe"), ["\n"])
    first = load_lm_eval_task(TASK, probe, 1, 0, tok, False).prompts[0]
    assert first.text is not None
    tokens = greedy(loaded, MAX_NEW, first.text)
    eos = tok.eos_token_id
    tokens = tokens[: tokens.index(eos)] if eos in tokens else tokens
    stop, expected = planted_stop(tok, tokens)
    yield backend, loaded, stop, expected, tokens
    backend.unload(loaded)


def test_the_tasks_stop_strings_and_eos_ride_on_every_prompt(planted: Any, tmp_path: Path) -> None:
    _, loaded, _, _, _ = planted
    task = load_lm_eval_task(
        TASK, _task_dir(tmp_path, ["\n", "Question:"]), 3, 0, loaded.tokenizer, False
    )
    assert [p.stop for p in task.prompts] == [("\n", "Question:", "</s>")] * 3


def test_the_generated_tokens_end_at_the_tasks_stop(planted: Any, tmp_path: Path) -> None:
    backend, loaded, stop, expected, tokens = planted
    tok = loaded.tokenizer
    task = load_lm_eval_task(TASK, _task_dir(tmp_path, [stop]), 1, 0, tok, False)
    assert task.prompts[0].stop == (stop, "</s>")

    out = backend.generate(loaded, task.prompts)

    assert out.output_tokens == [expected] and expected < MAX_NEW
    assert out.finish_reasons == ["stop"]
    assert out.texts == [tok.decode(tokens[:expected], skip_special_tokens=True)]
    assert out.texts[0].endswith(stop)
    # the judge reads the text cut before the stop string, as lm-eval cuts it
    judged = task.score(0, out.texts[0] + "7 8 9")
    assert judged.extracted == task.score(0, out.texts[0][: -len(stop)]).extracted


@pytest.mark.slow
def test_a_run_records_the_stop_strings_and_counts_tokens_to_the_stop(
    planted: Any, tiny_model_dir: Path, tmp_path: Path
) -> None:
    _, _, stop, expected, _ = planted
    run_dir = tmp_path / "run"
    proc = run_llem(
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "device=cpu",
        "measurement.energy=none",
        "dataset=lm_eval",
        f"dataset.task={TASK}",
        f"dataset.lm_eval_include={_task_dir(tmp_path / 'tasks', [stop])}",
        "dataset.n_prompts=1",
        "dataset.num_fewshot=0",
        f"decoder.max_new_tokens={MAX_NEW}",
        "measurement.warmup=0",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["workload"]["stop_strings"] == [stop, "</s>"]
    records = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert records and all(r["output_tokens"] == expected for r in records)
    assert all(r["finish_reason"] == "stop" for r in records)
    assert result["workload"]["output_tokens"] == expected * len(records)

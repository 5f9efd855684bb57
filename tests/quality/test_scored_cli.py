"""Scored runs through the command line: the built-in task on a tiny model, and every bad input
of the scoring keys as one line with its exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llem.testing.cli import output
from llem.testing.forked_cli import run_llem


def _tiny(model_dir: Path) -> list[str]:
    return ["model=hf", f"model.name_or_path={model_dir}", "device=cpu", "measurement.energy=none"]


@pytest.mark.slow
def test_the_builtin_task_prints_its_accuracy_and_writes_the_quality_section(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    proc = run_llem(
        *_tiny(tiny_model_dir),
        "dataset=arithmetic",
        "dataset.n_prompts=5",
        "decoder.max_new_tokens=4",
        "measurement.warmup=0",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("quality: "))
    result = json.loads((run_dir / "result.json").read_text())
    q = result["quality"]
    assert (q["task"], q["n_answers"]) == ("arithmetic", 5)
    assert f"{q['n_correct']}/5 answers correct" in line and "95% " in line and "Wilson" in line
    assert "J per correct answer: " in line and "NVML" not in line  # energy=none: its reason
    records = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert sum(r["correct"] for r in records) == q["n_correct"]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["dataset.scorer=bogus"], 2, "dataset.scorer=bogus is not one of: exact, number"),
        (["dataset.scorer=exact"], 2, "dataset.source=builtin has none"),
        (["dataset.task=gsm8k"], 2, "dataset.task=gsm8k applies to dataset.source=lm_eval only"),
        (["dataset=lm_eval"], 2, "dataset.task is not set"),
        (["dataset=arithmetic", "dataset.n_prompts=null"], 3, "dataset.n_prompts=null"),
        (
            ["dataset=jsonl", "dataset.path=noref.jsonl", "dataset.scorer=number"],
            3,
            "1 of its 2 prompts lack one (first: line 3)",
        ),
        (
            ["dataset=jsonl", "dataset.path=words.jsonl", "dataset.scorer=number"],
            3,
            "line 1: reference 'blue' holds no number",
        ),
        (
            [
                "dataset=jsonl",
                "dataset.path=words.jsonl",
                "dataset.scorer=regex",
                "dataset.n_prompts=2",
            ],
            3,
            "line 2: reference '(' is not a regular expression",
        ),
    ],
)
@pytest.mark.slow
def test_bad_scoring_input_is_one_line_with_its_exit_code(
    tiny_model_dir: Path, tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    (tmp_path / "noref.jsonl").write_text('{"prompt": "a", "reference": 1}\n\n{"prompt": "b"}\n')
    (tmp_path / "words.jsonl").write_text(
        '{"prompt": "sky?", "reference": "blue"}\n{"prompt": "x", "reference": "("}\n'
    )
    proc = run_llem(*_tiny(tiny_model_dir), *args, cwd=tmp_path)
    assert proc.returncode == code, output(proc)
    assert says in proc.stderr and "Traceback" not in proc.stderr, output(proc)


DATA = Path(__file__).parent / "data"


def _task_dir(tmp_path: Path, data_dir: Path = DATA) -> Path:
    """lm-eval task yamls naming the test data (``data_dir``: where their data files are)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("llem_arith.yaml", "llem_arith_choice.yaml"):
        text = (DATA / name).read_text().replace("DATA_DIR", str(data_dir))
        (tasks / name).write_text(text)
    return tasks


@pytest.mark.slow
def test_an_lm_eval_task_with_local_data_is_scored_like_the_builtin_one(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    proc = run_llem(
        *_tiny(tiny_model_dir),
        "dataset=lm_eval",
        "dataset.task=llem_arith",
        f"dataset.lm_eval_include={_task_dir(tmp_path)}",
        "dataset.n_prompts=6",
        "dataset.num_fewshot=2",
        "decoder.max_new_tokens=4",
        "measurement.warmup=0",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    q = json.loads((run_dir / "result.json").read_text())["quality"]
    assert (q["task"], q["n_answers"]) == ("lm_eval:llem_arith", 6)
    assert q["metric"] == "exact_match,first-number"
    assert any(x.startswith("quality: lm_eval:llem_arith ") for x in proc.stdout.splitlines())


@pytest.mark.parametrize(
    ("task", "moved", "code", "says"),
    [
        ("llem_arith_choice", False, 3, "by loglikelihood (output_type multiple_choice)"),
        ("llem_arith", True, 3, "nowhere/arith_train.jsonl is not there"),
    ],
    ids=["loglikelihood", "missing-data"],
)
@pytest.mark.slow
def test_an_lm_eval_task_that_cannot_be_measured_fails_preflight_in_one_line(
    tiny_model_dir: Path, tmp_path: Path, task: str, moved: bool, code: int, says: str
) -> None:
    tasks = _task_dir(tmp_path, tmp_path / "nowhere" if moved else DATA)
    proc = run_llem(
        *_tiny(tiny_model_dir),
        "dataset=lm_eval",
        f"dataset.task={task}",
        f"dataset.lm_eval_include={tasks}",
        cwd=tmp_path,
    )
    assert proc.returncode == code, output(proc)
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and says in errors[0], output(proc)
    assert "Traceback" not in proc.stderr

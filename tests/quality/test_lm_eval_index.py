"""lm-eval's own task index kept in llem's cache (llem/quality/lm_eval_index.py): a task name is
checked against it without lm-eval's walk over its task yamls, which is built once.

lm-eval's TaskManager is replaced by a planted index (its names, kinds and yaml files), counted
each time it is built: the walk it stands for takes 20 to 40 s on a 2-core CPU.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("lm_eval")

from llem.quality import lm_eval_index, lm_eval_task  # noqa: E402
from llem.quality.lm_eval_task import lm_eval_problems  # noqa: E402

# These tests make and read the cache themselves: none of it is shared with other tests.
pytestmark = pytest.mark.own_llem_cache

CHOICE_YAML = """task: planted_choice
dataset_path: json
dataset_kwargs: {data_files: {test: DATA}}
output_type: multiple_choice
doc_to_text: "{{question}}"
doc_to_choice: ["a", "b"]
doc_to_target: 0
"""


def _entry(kind: str, yaml_path: Path | None) -> SimpleNamespace:
    return SimpleNamespace(kind=SimpleNamespace(name=kind), yaml_path=yaml_path, cfg=None)


class _Walks:
    """A stand-in for ``lm_eval_task._manager``: lm-eval's own index, planted, counting how
    often it is built (each build is the walk over every task yaml)."""

    def __init__(self, index: dict[str, Any], local: Any) -> None:
        self.index, self.local, self.builds = index, local, 0

    def __call__(self, include_path: str | None, include_defaults: bool) -> Any:
        if not include_defaults:  # a directory of the user's: lm-eval's own TaskManager
            return self.local(include_path, False)
        assert include_path is None  # lm-eval's own tasks alone are kept
        self.builds += 1
        return SimpleNamespace(task_index=self.index, all_tasks=sorted(self.index))


@pytest.fixture
def walks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Walks:
    """Three of lm-eval's tasks (gsm8k's real yaml, a group, a tag) and a multiple-choice task
    whose yaml lies outside lm-eval's directory."""
    choice = tmp_path / "planted_choice.yaml"
    (tmp_path / "choice.jsonl").write_text('{"question": "a or b?"}\n')
    choice.write_text(CHOICE_YAML.replace("DATA", str(tmp_path / "choice.jsonl")))
    own = lm_eval_index.tasks_dir()
    assert own is not None
    planted = _Walks(
        {
            "gsm8k": _entry("TASK", own / "gsm8k" / "gsm8k.yaml"),
            "planted_group": _entry("GROUP", own / "gsm8k" / "gsm8k.yaml"),
            "math_word_problems": _entry("TAG", None),
            "planted_choice": _entry("TASK", choice),
        },
        lm_eval_task._manager,
    )
    monkeypatch.setattr(lm_eval_task, "_manager", planted)
    return planted


def test_a_second_unknown_name_is_refused_from_the_kept_index_without_a_walk(
    walks: _Walks,
) -> None:
    unknown = (
        "dataset.task=gsm8kk: no such lm-eval task; allowed: an lm-eval task name "
        "(close names: gsm8k)"
    )
    assert lm_eval_problems("gsm8kk", None) == [unknown]
    assert walks.builds == 1
    kept = lm_eval_index.index_file()
    assert kept is not None and kept.is_file()
    assert lm_eval_problems("gsm8kk", None) == [unknown]
    assert lm_eval_problems("planted_choise", None) == [
        "dataset.task=planted_choise: no such lm-eval task; allowed: an lm-eval task name "
        "(close names: planted_choice, planted_group)"
    ]
    assert walks.builds == 1


def test_a_known_name_s_kind_and_yaml_come_from_the_kept_index(
    walks: _Walks, tmp_path: Path
) -> None:
    lm_eval_problems("gsm8kk", None)  # builds and keeps the index
    kept = lm_eval_index.index_file()
    assert kept is not None
    tasks = json.loads(kept.read_text())["tasks"]
    assert tasks["gsm8k"] == ["TASK", "gsm8k/gsm8k.yaml"]  # under lm-eval's own directory
    assert tasks["math_word_problems"] == ["TAG", None]
    assert tasks["planted_choice"] == ["TASK", str(tmp_path / "planted_choice.yaml")]

    (group,) = lm_eval_problems("planted_group", None)
    assert group.startswith("dataset.task=planted_group: lm-eval's planted_group is a group")
    (tag,) = lm_eval_problems("math_word_problems", None)
    assert tag.startswith("dataset.task=math_word_problems: lm-eval's math_word_problems is a tag")
    (choice,) = lm_eval_problems("planted_choice", None)
    assert "(output_type multiple_choice)" in choice
    (gsm8k,) = lm_eval_problems("gsm8k", None)  # its real yaml read: openai/gsm8k, not cached
    assert gsm8k.startswith("dataset.task=gsm8k: its dataset openai/gsm8k is not in this")
    assert walks.builds == 1


def test_another_lm_eval_version_or_a_broken_file_builds_the_index_again(
    walks: _Walks, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm_eval_problems("gsm8kk", None)
    first = lm_eval_index.index_file()
    assert first is not None
    first.write_text('{"tasks": ["not an index"]}')
    lm_eval_problems("gsm8kk", None)
    assert walks.builds == 2
    assert json.loads(first.read_text())["tasks"]["gsm8k"] == ["TASK", "gsm8k/gsm8k.yaml"]

    monkeypatch.setattr(lm_eval_index.importlib.metadata, "version", lambda name: "9.9.9")
    second = lm_eval_index.index_file()
    assert second is not None and second != first and second.name.startswith("tasks-9.9.9-")
    lm_eval_problems("gsm8kk", None)
    assert walks.builds == 3 and second.is_file()


def test_a_cache_that_cannot_be_written_still_answers(
    walks: _Walks, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("LLEM_CACHE_DIR", str(blocked))
    (problem,) = lm_eval_problems("gsm8kk", None)
    assert problem.endswith("(close names: gsm8k)")
    assert blocked.read_text() == ""


def test_an_include_directory_is_read_afresh_beside_the_kept_index(
    walks: _Walks, tmp_path: Path
) -> None:
    """Names in ``dataset.lm_eval_include`` are offered beside lm-eval's own, and a directory
    written after lm-eval's index was kept is read: it is never cached."""
    lm_eval_problems("gsm8kk", None)
    include = tmp_path / "tasks"
    include.mkdir()
    planted = (tmp_path / "planted_choice.yaml").read_text()  # the fixture's, its data there
    (include / "llem_planted.yaml").write_text(planted.replace("planted_choice", "llem_planted"))
    (problem,) = lm_eval_problems("llem_plantd", str(include))
    assert problem.endswith("(close names: llem_planted)")
    assert f"or in dataset.lm_eval_include={include}" in problem
    (choice,) = lm_eval_problems("llem_planted", str(include))
    assert "(output_type multiple_choice)" in choice
    assert walks.builds == 1

"""A task's scoring by prompt index (llem.quality.task), where mutation testing found no test
(scripts/mutation.py): an index one past the last prompt is refused with both numbers."""

from __future__ import annotations

import pytest

from llem.quality.scorers import Score, exact
from llem.quality.task import Task
from llem.vocabulary.workload import Prompt


def _task() -> Task:
    refs = ["paris", "rome"]
    prompts = [Prompt(f"capital {i}") for i in range(2)]
    return Task("planted", "exact_match", "exact", prompts, lambda i, t: exact(t, refs[i]))


def test_each_answer_is_judged_against_its_own_prompt_s_reference() -> None:
    task = _task()
    assert task.score(1, "Rome") == Score(True, "rome")
    assert task.score(0, "Rome") == Score(False, "rome")


def test_an_index_past_the_last_prompt_is_refused_with_both_numbers() -> None:
    with pytest.raises(IndexError, match="prompt 2 is not one of the task's 2"):
        _task().score(2, "Rome")
    with pytest.raises(IndexError, match="prompt -1 is not one of the task's 2"):
        _task().score(-1, "Rome")

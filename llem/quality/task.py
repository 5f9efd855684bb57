"""A task: prompts that each have a reference, and how one generated answer is judged.

Every source of scored prompts (the built-in arithmetic task, a JSONL file with references, an
lm-evaluation-harness task) becomes a ``Task``. The run generates from ``prompts`` inside the
measured window as it would from any prompts; after the window, ``score`` judges each request's
text by the index of the prompt it was given (``RequestRecord.prompt_index``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llem.quality.scorers import Score
from llem.vocabulary.workload import Prompt

Judge = Callable[[int, str], Score]  # (prompt index, generated text) -> its score


@dataclass(frozen=True)
class Task:
    """Scored prompts.

    ``name`` says where they come from (``arithmetic``, ``jsonl``, ``lm_eval:gsm8k``); ``metric``
    names the proportion ``quality.value`` is (``exact_match``, ``accuracy``); ``scorer`` says in
    one phrase how one answer is judged. ``templated``: the prompts already carry the model's chat
    template (or were built to go without one), so the run applies none of its own.
    """

    name: str
    metric: str
    scorer: str
    prompts: Sequence[Prompt]
    judge: Judge
    templated: bool = False

    def score(self, prompt_index: int, text: str) -> Score:
        if not 0 <= prompt_index < len(self.prompts):
            raise IndexError(f"prompt {prompt_index} is not one of the task's {len(self.prompts)}")
        return self.judge(prompt_index, text)

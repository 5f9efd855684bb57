"""The built-in arithmetic task: reproducible from its seed, every reference exact."""

from __future__ import annotations

import re

import pytest

from llem.quality.arithmetic import problems

SHAPE = re.compile(r"What is (\d+) ([-+*]) (\d+)\? Answer with the number only\.")


def _worked_out(prompt: str) -> int:
    """The answer computed here from the prompt's own text."""
    match = SHAPE.fullmatch(prompt)
    assert match, prompt
    a, op, b = int(match[1]), match[2], int(match[3])
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def test_every_reference_is_the_exact_answer_to_its_prompt() -> None:
    for problem in problems(300, seed=3):
        assert int(problem.reference) == _worked_out(problem.prompt)


def test_the_same_seed_gives_the_same_problems_and_another_seed_others() -> None:
    assert problems(20, seed=1) == problems(20, seed=1)
    assert problems(20, seed=1) != problems(20, seed=2)


def test_all_three_operations_appear_and_no_answer_is_negative() -> None:
    found = problems(200, seed=0)
    ops = {SHAPE.fullmatch(p.prompt)[2] for p in found}  # type: ignore[index]
    assert ops == {"+", "-", "*"}
    assert all(int(p.reference) >= 0 for p in found)


def test_at_least_one_problem() -> None:
    with pytest.raises(ValueError):
        problems(0, seed=0)

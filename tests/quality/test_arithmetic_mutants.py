"""The built-in arithmetic task's operands (llem.quality.arithmetic), where mutation testing
found no test (scripts/mutation.py): the ranges its docstring gives (a number up to 20 plus or
minus a one-digit number, never below zero; the product of two one-digit numbers), each end
reached, and the smallest task."""

from __future__ import annotations

import re

import pytest

from llem.quality.arithmetic import problems

SHAPE = re.compile(r"What is (\d+) ([-+*]) (\d+)\? Answer with the number only\.")


def _operands(n: int, seed: int) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {"+": [], "-": [], "*": []}
    for p in problems(n, seed):
        match = SHAPE.fullmatch(p.prompt)
        assert match, p.prompt
        out[match[2]].append((int(match[1]), int(match[3])))
    return out


def _range(values: list[int]) -> tuple[int, int]:
    return min(values), max(values)


def test_each_operation_draws_its_operands_from_the_documented_ranges() -> None:
    ops = _operands(3000, seed=11)
    times = ops["*"]
    assert _range([a for a, _ in times]) == (2, 9) and _range([b for _, b in times]) == (2, 9)
    plus = ops["+"]
    assert _range([a for a, _ in plus]) == (2, 20) and _range([b for _, b in plus]) == (1, 9)
    assert any(a < b for a, b in plus)  # a sum keeps its operands in the order drawn
    minus = ops["-"]
    assert _range([a for a, _ in minus]) == (2, 20) and _range([b for _, b in minus]) == (1, 9)
    assert all(a >= b for a, b in minus)  # never below zero


def test_one_problem_is_a_task_and_none_is_refused_with_the_count() -> None:
    assert len(problems(1, seed=0)) == 1
    with pytest.raises(ValueError, match="need at least one problem, got 0"):
        problems(0, seed=0)

"""The built-in arithmetic task: problems with exact answers, generated from a seed.

Each problem is one operation on whole numbers (``a + b``, ``a - b`` or ``a * b``), with its
operands drawn from ranges that make a small model right on some and wrong on others: a number up
to 20 plus or minus a one-digit number (never below zero), and the product of two one-digit
numbers. The default model (SmolLM2-135M-Instruct) got 12 of 24 such problems right and 0 of 8
with two-digit operands, so the task tells configurations apart instead of scoring 0 for all. The
same seed always gives the same problems, so a run's task is reproducible from its
configuration. Answers are scored with the ``number`` scorer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PROMPT = "What is {a} {op} {b}? Answer with the number only."
SCORER = "number"


@dataclass(frozen=True)
class Problem:
    prompt: str
    reference: str  # the exact answer, as digits


def _operands(rng: random.Random, op: str) -> tuple[int, int]:
    if op == "*":
        return rng.randint(2, 9), rng.randint(2, 9)
    a, b = rng.randint(2, 20), rng.randint(1, 9)
    return (max(a, b), min(a, b)) if op == "-" else (a, b)


def problems(n: int, seed: int) -> list[Problem]:
    """``n`` problems drawn from ``seed``."""
    if n < 1:
        raise ValueError(f"need at least one problem, got {n}")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        op = rng.choice("+-*")
        a, b = _operands(rng, op)
        answer = a + b if op == "+" else a - b if op == "-" else a * b
        out.append(Problem(PROMPT.format(a=a, op=op, b=b), str(answer)))
    return out

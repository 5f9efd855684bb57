"""The built-in arithmetic task: problems with exact answers, generated from a seed.

Each problem is one operation on whole numbers (``a + b``, ``a - b`` or ``a * b``), with its
operands drawn from ranges that make a small model right on some and wrong on others: sums and
differences of two-digit numbers, products of a two-digit and a one-digit number. The same seed
always gives the same problems, so a run's task is reproducible from its configuration. Answers are
scored with the ``number`` scorer.
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
        return rng.randint(11, 99), rng.randint(2, 9)
    a, b = rng.randint(10, 99), rng.randint(10, 99)
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

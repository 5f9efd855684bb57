"""The verdict every bench prints at its end: each target, its figure, and "met" or "NOT met".

    from _verdict import Target, report
    report([Target("generate-time ratio llem / plain", 1.04, "<=", 1.10)])

prints

    verdicts:
      generate-time ratio llem / plain: 1.04 (target <= 1.1): met

and returns True when every target is met. A figure that could not be computed (None, NaN) is
"NOT met" with the reason; a ``Check`` is a target in words (a trend, a label) with the same line.
``python bench/<name>.py`` puts bench/ first on ``sys.path``, so the benches import this module
as ``_verdict``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}


@dataclass(frozen=True)
class Target:
    """``figure op bound`` (e.g. ``ratio <= 1.10``); ``unit`` is printed after numbers; ``why``
    says why ``figure`` is None, when it is."""

    name: str
    figure: float | None
    op: str
    bound: float
    unit: str = ""
    why: str = ""

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"op={self.op!r} (allowed: {', '.join(_OPS)})")

    @property
    def met(self) -> bool:
        f = self.figure
        return f is not None and not math.isnan(f) and _OPS[self.op](f, self.bound)

    def line(self) -> str:
        if self.figure is None or math.isnan(self.figure):
            shown = f"no figure ({self.why})" if self.why else "no figure"
        else:
            shown = f"{self.figure:.4g}{self.unit}"
        return verdict_line(self.name, shown, f"{self.op} {self.bound:g}{self.unit}", self.met)


@dataclass(frozen=True)
class Check:
    """A target that is not one number against a bound (``goal`` in words, e.g. "falls as the
    batch grows"); ``passed`` None means it could not be checked, which is not met."""

    name: str
    shown: str
    goal: str
    passed: bool | None

    @property
    def met(self) -> bool:
        return self.passed is True

    def line(self) -> str:
        shown = self.shown if self.passed is not None else f"{self.shown} (not checked)"
        return verdict_line(self.name, shown, self.goal, self.met)


def verdict_line(name: str, shown: str, goal: str, met: bool) -> str:
    """``name: figure (target goal): met`` or ``... : NOT met``."""
    return f"{name}: {shown} (target {goal}): {'met' if met else 'NOT met'}"


def report(targets: Iterable[Target | Check], printer: Callable[[str], None] = print) -> bool:
    """Print one verdict line per target under a ``verdicts:`` heading; True when all are met."""
    targets = list(targets)
    printer("verdicts:")
    for t in targets:
        printer(f"  {t.line()}")
    return all(t.met for t in targets)

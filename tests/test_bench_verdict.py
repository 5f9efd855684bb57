"""The verdict line every bench ends with (bench/_verdict.py); the benches are not run here."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load_verdict():
    spec = importlib.util.spec_from_file_location("_verdict", BENCH / "_verdict.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("_verdict", module)
    spec.loader.exec_module(module)
    return module


verdict = _load_verdict()


def test_a_ratio_that_misses_its_target_is_not_met() -> None:
    lines: list[str] = []
    ok = verdict.report([verdict.Target("generate-time ratio", 1.62, "<=", 1.10)], lines.append)
    assert not ok
    assert lines == ["verdicts:", "  generate-time ratio: 1.62 (target <= 1.1): NOT met"]


def test_a_figure_just_under_a_lower_bound_is_not_met() -> None:
    # bench/sampler_overhead.py printed 0.9855 against 0.99 without saying so
    t = verdict.Target("with / without sampler", 0.9855, ">=", 0.99)
    assert not t.met
    assert t.line().endswith("0.9855 (target >= 0.99): NOT met")


def test_figures_that_meet_their_targets_are_met() -> None:
    lines: list[str] = []
    targets = [
        verdict.Target("ratio", 1.10, "<=", 1.10),
        verdict.Target("help", 0.4, "<", 1.0, " s"),
        verdict.Target("pairs", 0.995, ">=", 0.99),
    ]
    assert verdict.report(targets, lines.append)
    assert all(line.endswith(": met") for line in lines[1:])
    assert lines[2] == "  help: 0.4 s (target < 1 s): met"


@pytest.mark.parametrize("figure", [None, math.nan])
def test_a_missing_figure_is_not_met(figure: float | None) -> None:
    t = verdict.Target("counter vs power", figure, "<=", 0.02, why="no energy")
    assert not t.met
    assert t.line() == "counter vs power: no figure (no energy) (target <= 0.02): NOT met"


def test_a_check_in_words_not_checked_is_not_met() -> None:
    lines: list[str] = []
    checks = [
        verdict.Check("J/token vs batch", "1: 0.5, 8: 0.1", "falls as batch grows", True),
        verdict.Check("compile label", "run failed", "label matches what ran", None),
    ]
    assert not verdict.report(checks, lines.append)
    assert lines[1].endswith("(target falls as batch grows): met")
    assert lines[2] == (
        "  compile label: run failed (not checked) (target label matches what ran): NOT met"
    )


def test_an_unknown_comparison_is_refused() -> None:
    with pytest.raises(ValueError, match="allowed"):
        verdict.Target("x", 1.0, "=<", 1.0)


@pytest.mark.parametrize(
    "script", sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))
)
def test_every_bench_with_a_target_ends_with_the_shared_verdicts(script: str) -> None:
    text = (BENCH / script).read_text()
    assert "target" in text.lower(), f"{script} names no target"
    assert "from _verdict import" in text and "report(" in text, (
        f"{script} has a target but does not print the shared met / NOT met verdicts"
    )
    assert "'met' if" not in text and '"met" if' not in text, f"{script} prints its own verdict"

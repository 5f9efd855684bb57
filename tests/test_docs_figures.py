"""scripts/docs_figures.py: the figures the docs state that a script can recompute, checked
against it: test counts from one collection, the default configuration's values."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_figures", REPO / "scripts" / "docs_figures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_figures"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


PAGE = """# Tests

The fast loop leaves them out (7<!-- figure: tests.slow --> of the 1,010<!-- figure: tests -->
tests), so it runs 1,003<!-- figure: tests.fast --> of them. A run makes
64<!-- figure: default.decoder.max_new_tokens --> tokens.

On 2026-11-27 the loop had 1,485 tests and took 160 s.

```bash
python -m pytest -q -m "not slow"   # the fast loop: 1,451 tests
```
"""

PLANTED = {  # the truths the check is held to, not computed by it
    "tests": 1010,
    "tests.slow": 7,
    "tests.fast": 1003,
    "default.decoder.max_new_tokens": 64,
}


def _plant(figures: ModuleType, monkeypatch: pytest.MonkeyPatch, **changed: int) -> None:
    truth = {**PLANTED, **{k.replace("_", "."): v for k, v in changed.items()}}
    monkeypatch.setattr(figures, "values", lambda names: {n: truth.get(n) for n in names})


def test_pytest_s_last_line_gives_every_count(figures: ModuleType) -> None:
    counts = figures.parse_collection("332/2069 tests collected (1737 deselected) in 29.50s")
    assert counts == {"tests": 2069, "tests.slow": 332, "tests.fast": 1737}
    assert figures.parse_collection("12 tests collected in 1.0s") == {
        "tests": 12,
        "tests.slow": 12,
        "tests.fast": 0,
    }
    failed = figures.parse_collection("3/10 tests collected (7 deselected), 1 error in 2s")
    assert failed.fails and "collection failed" in failed.reason
    skipped = figures.parse_collection("3/10 tests collected (7 deselected), 2 skipped in 2s")
    assert not skipped.fails and "skipped at collection" in skipped.reason


def test_marked_figures_pass_where_they_are_right_and_unmarked_counts_fail(
    figures: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    _plant(figures, monkeypatch)
    rows = figures.check([page])
    assert [(v, where) for v, where, _ in rows] == [
        ("PASS", "page.md:3  7"),
        ("PASS", "page.md:3  1,010"),
        ("PASS", "page.md:4  1,003"),
        ("PASS", "page.md:5  64"),
        ("FAIL", "page.md:10  1,451 tests"),  # a code comment's count; the dated one is history
    ]


def test_a_stale_figure_fails_with_both_values_and_write_sets_it(
    figures: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    _plant(figures, monkeypatch, tests=2069, tests_fast=2062)
    rows = {where: (v, d) for v, where, d in figures.check([page])}
    verdict, detail = rows["page.md:3  1,010"]
    assert verdict == "FAIL" and "says 1,010, tests is 2,069" in detail
    assert rows["page.md:3  7"][0] == "PASS"
    assert figures.write([page]) == 2
    text = page.read_text()
    assert "2,069<!-- figure: tests -->" in text and "2,062<!-- figure: tests.fast -->" in text
    assert "7<!-- figure: tests.slow -->" in text and "1,451 tests" in text  # the rest as it was


def test_an_unknown_name_and_a_machine_that_cannot_count_are_said(
    figures: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.md"
    page.write_text("It has 3<!-- figure: test --> parts and 4<!-- figure: tests --> tests.\n")
    why = figures.NoValue("test modules were skipped at collection", fails=False)
    monkeypatch.setattr(figures, "values", lambda names: {"tests": why})
    rows = [(v, d) for v, _, d in figures.check([page])]
    assert rows[0][0] == "FAIL" and "no figure is named 'test'" in rows[0][1]
    assert rows[1] == ("SKIP", "test modules were skipped at collection")


def test_a_default_is_looked_up_by_its_dotted_key(figures: ModuleType) -> None:
    assert figures.lookup({"decoder": {"max_new_tokens": 64}}, "decoder.max_new_tokens") == 64
    with pytest.raises(KeyError):
        figures.lookup({"decoder": {}}, "decoder.max_new_tokens")


def test_a_value_is_written_as_the_docs_write_it(figures: ModuleType) -> None:
    assert [figures.written(v) for v in (2069, 5.0, 0.5, 12)] == ["2,069", "5", "0.5", "12"]

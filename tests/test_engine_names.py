"""No module outside an engine's own package and the engine table compares engine names: the run,
report and configuration layers ask the engine's row (llem.config.engines) instead, so a new
engine is a row and a package, not an edit in every module that happens to know one."""

from __future__ import annotations

import ast
from pathlib import Path

from llem.config.engines import ENGINES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "llem"
ALLOWED = {
    PACKAGE / "config" / "engines.py",  # the table itself
    PACKAGE / "result" / "migrate.py",  # reads files written before the table, by their text
}
NAMES = {e.name for e in ENGINES}
CONSTANTS = {n.upper() for n in NAMES}  # PYTORCH, VLLM
EQUALITY = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _engine_packages() -> set[Path]:
    return {PACKAGE.joinpath(*e.driver.split(".")[1:]) for e in ENGINES}


def _names_an_engine(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_an_engine(e) for e in node.elts)
    if isinstance(node, ast.Name):
        return node.id in CONSTANTS
    if isinstance(node, ast.Attribute):  # engines.VLLM, or the backend itself: exp.backend
        return node.attr in CONSTANTS or node.attr == "backend"
    return False


def comparisons(source: str) -> list[int]:
    """Lines that compare something with an engine name (``== "vllm"``, ``== PYTORCH``,
    ``exp.backend in (...)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        if not all(isinstance(op, EQUALITY) for op in node.ops):
            continue  # `exp.backend is None` asks whether one is named, not which
        if any(_names_an_engine(side) for side in (node.left, *node.comparators)):
            found.append(node.lineno)
    return found


def test_the_check_finds_planted_comparisons() -> None:
    planted = 'a = exp.backend == "vllm"\nb = name != PYTORCH\nc = x in ("pytorch",)\n'
    assert comparisons(planted) == [1, 2, 3]
    assert comparisons('d = exp.backend is None\ne = device == "cpu"\n') == []


def test_no_module_outside_the_engines_and_the_table_compares_engine_names() -> None:
    engines = _engine_packages()
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in ALLOWED or any(p in engines for p in (path, *path.parents)):
            continue
        offenders += [f"{path.relative_to(ROOT)}:{n}" for n in comparisons(path.read_text())]
    assert offenders == [], "ask the engine's row (llem.config.engines) instead: " + ", ".join(
        offenders
    )

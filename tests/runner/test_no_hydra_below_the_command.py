"""The engines and the run layer are handed what Hydra knows (the run directory, the launcher):
no module of theirs imports Hydra, so a run behaves the same from the Python API as under a
Hydra job."""

from __future__ import annotations

import ast
from pathlib import Path

LLEM = Path(__file__).resolve().parents[2] / "llem"
HANDED_IN = ("runner", "backends", "measure", "result", "devices", "figures", "quality")


def _hydra_imports(path: Path) -> list[int]:
    lines: list[int] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        lines += [node.lineno for name in names if name.split(".")[0] == "hydra"]
    return lines


def test_no_module_of_the_run_or_the_engines_imports_hydra() -> None:
    found = [
        f"{path.relative_to(LLEM.parent)}:{line}"
        for folder in HANDED_IN
        for path in sorted((LLEM / folder).rglob("*.py"))
        for line in _hydra_imports(path)
    ]
    assert found == []

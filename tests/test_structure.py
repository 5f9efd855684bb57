"""The package keeps its shape: no import circle, no import up the layers, no function over 60
lines, no module over 400 lines, and Hydra's internals only in llem/app (scripts/structure.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "structure.py"


def _structure() -> ModuleType:
    spec = importlib.util.spec_from_file_location("structure", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["structure"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_package_keeps_its_shape() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_planted_circle_and_an_upward_import_are_found() -> None:
    s = _structure()
    imports = [
        s.Import("llem.measure.a", "llem.result.b", 1, False),
        s.Import("llem.result.b", "llem.measure.a", 3, True),  # result below measure: upward
    ]
    assert s.cycles(imports) == [["llem.measure.a", "llem.result.b"]]
    assert [(i.source, i.target) for i in s.upward(imports)] == [
        ("llem.result.b", "llem.measure.a")
    ]


def test_entry_points_and_parent_packages_are_not_upward() -> None:
    s = _structure()
    imports = [
        s.Import("llem.report.__main__", "llem.app.boundary", 1, False),  # an entry point
        s.Import("llem.measure.nvml", "llem.measure", 1, False),  # its own package
        s.Import("llem.result.model", "llem", 1, False),  # the top package: upward
    ]
    assert [i.source for i in s.upward(imports)] == ["llem.result.model"]


def test_no_test_edits_sys_path() -> None:
    """Tests import what they need through pytest's pythonpath (pyproject.toml: tests/, bench/),
    never by editing ``sys.path``."""
    edits = ("sys.path.insert", "sys.path.append", "sys.path[")
    found = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path.name != Path(__file__).name and any(e in path.read_text() for e in edits)
    ]
    assert found == []

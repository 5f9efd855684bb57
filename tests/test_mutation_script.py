"""scripts/mutation.py without running mutmut: the modules it takes, the changed lines it prints,
the equivalent mutants it reads, and a rerun's figures merged into the earlier run's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation", ROOT / "scripts" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_the_default_modules_are_the_attribution_quality_and_uncertainty_modules() -> None:
    m = _script()
    modules = m.modules_of(m.MODULES)
    assert "llem/figures/bins.py" in modules and "llem/measure/interval.py" in modules
    assert "llem/quality/scorers.py" in modules and "llem/quality/__init__.py" not in modules
    assert all(m.tests_of(x) for x in modules)  # each has its tests


def test_an_unknown_module_is_one_line_and_exit_2(capsys) -> None:
    m = _script()
    pytest.importorskip("mutmut")
    assert m.main(["llem/figures/nothing.py"]) == 2
    err = capsys.readouterr().err
    assert (
        err.strip() == f"error: module 'llem/figures/nothing.py': no such Python file under {ROOT}"
    )


def test_a_mutant_s_change_is_its_removed_and_added_lines() -> None:
    diff = "--- a.py\n+++ b.py\n@@ -1,2 +1,2 @@\n def f():\n-    return x + 1\n+    return x - 1\n"
    assert _script().changed_lines(diff) == ["- return x + 1", "+ return x - 1"]


def test_every_equivalent_mutant_has_its_line_and_a_reason_in_a_listed_module() -> None:
    m = _script()
    modules = {x.removesuffix(".py").replace("/", ".") for x in m.modules_of(m.MODULES)}
    entries = m.load_equivalents()
    assert entries
    for name, e in entries.items():
        assert e.line and e.reason, name
        assert name.rsplit(".", 1)[0] in modules, name


def test_a_rerun_replaces_the_earlier_survivors_and_keeps_the_rest() -> None:
    m = _script()
    earlier = {
        "module": "llem/x.py",
        "counts": {"killed": 8, "survived": 2, "timeout": 1},
        "survivors": [{"name": "a", "status": "survived"}, {"name": "b", "status": "survived"}],
    }
    out = m.Outcome("llem/x.py", [], 1.0, counts={"killed": 1, "survived": 1})
    out.survivors = [m.Survivor("b", "survived", [])]
    m._merge(out, earlier)
    assert out.counts == {"killed": 9, "survived": 1, "timeout": 1}
    assert out.rate == pytest.approx(100 * 10 / 11)
    grown = m.Outcome("llem/x.py", [], 1.0, counts={"killed": 3})
    with pytest.raises(m.BadInput):
        m._merge(grown, earlier)

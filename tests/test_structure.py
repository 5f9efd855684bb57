"""The package keeps its shape: no import circle between modules or packages, no import up the
layers, every folder in one layer, no function over 60 lines, no module over 400 lines, and Hydra's
internals only in llem/app and llem/hydra (scripts/structure.py)."""

from __future__ import annotations

import importlib.util
import re
import shutil
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


def test_the_package_keeps_its_shape(capsys: pytest.CaptureFixture[str]) -> None:
    # in the fast loop (4 s, in process), so a module over the size cap fails it there
    status = _structure().main(["--check"])
    assert status == 0, capsys.readouterr().out


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


def _planted_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """structure.py pointed at a copy of llem/ in tmp_path, to plant what the real tree lacks."""
    s = _structure()
    shutil.copytree(ROOT / "llem", tmp_path / "llem", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(s, "ROOT", tmp_path)
    return s


def _plant(root: Path, module: str, text: str) -> None:
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_planted_upward_import_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    s = _planted_copy(tmp_path, monkeypatch)
    assert s.import_problems(s.all_imports(), set(s.package_modules())) is False
    steps = tmp_path / "llem" / "result" / "steps.py"
    steps.write_text(steps.read_text() + "\nfrom llem.backends import models  # planted\n")
    capsys.readouterr()
    assert s.import_problems(s.all_imports(), set(s.package_modules())) is True
    out = capsys.readouterr().out
    assert "imports running up the layers: 1" in out
    assert re.search(r"llem\.result\.steps:\d+ -> llem\.backends\.models", out)


def test_a_planted_circle_between_packages_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two engine packages that import each other through four different modules: no module
    circle, but a circle between llem.backends.pytorch and llem.backends.server."""
    s = _planted_copy(tmp_path, monkeypatch)
    _plant(
        tmp_path, "llem.backends.pytorch.planted_a", "from llem.backends.server import planted_b\n"
    )
    _plant(tmp_path, "llem.backends.server.planted_b", "X = 1\n")
    _plant(
        tmp_path, "llem.backends.server.planted_c", "from llem.backends.pytorch import planted_d\n"
    )
    _plant(tmp_path, "llem.backends.pytorch.planted_d", "Y = 1\n")
    imports = s.all_imports()
    assert s.cycles(imports) == []
    assert s.package_cycles(imports) == [["llem.backends.pytorch", "llem.backends.server"]]
    capsys.readouterr()
    assert s.import_problems(imports, set(s.package_modules())) is True
    assert "circles between packages: 1" in capsys.readouterr().out


def test_a_module_in_no_layer_is_an_error_not_the_top_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _structure()
    monkeypatch.setattr(s, "LAYERS", [("base", ["llem.errors"]), ("gone", ["llem.gone"])])
    assert s.layer_map_problems({"llem.errors", "llem.new.thing"}) == [
        "llem.gone: matches no module",
        "llem.new.thing: its folder is in no layer",
    ]
    with pytest.raises(s.UnplacedModule, match="llem.new is in no layer"):
        s.layer_of("llem.new.thing")
    monkeypatch.setattr(s, "LAYERS", [("a", ["llem.errors"]), ("b", ["llem.errors"])])
    assert s.layer_map_problems({"llem.errors"}) == ["llem.errors: in more than one layer"]


def test_the_layer_map_fits_the_package_and_matches_import_linter() -> None:
    """structure.py's LAYERS and pyproject.toml's import-linter layers contract name the same
    folders in the same order, and every module of llem has its folder in exactly one layer."""
    tomllib = pytest.importorskip("tomllib")
    s = _structure()
    assert s.layer_map_problems(set(s.package_modules())) == []
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    linted = [
        sorted("llem." + m.strip() for m in re.split("[|:]", layer)) for layer in contract["layers"]
    ]
    assert linted[::-1] == [sorted(folders) for _, folders in s.LAYERS]


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


def _page_layers(page: str) -> list[tuple[str, list[str]]]:
    """The layers table of docs/design.md: each row's layer and its folders as module names."""
    rows = []
    for line in page.split("## The layers", 1)[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "---"):
            continue
        names = re.findall(r"`([^`]+)`", cells[1])
        rows.append(
            (cells[0], sorted("llem." + n.removesuffix("/").removesuffix(".py") for n in names))
        )
    return rows


def test_the_design_pages_layer_table_is_the_layer_map() -> None:
    """docs/design.md's table names the layers of structure.py's LAYERS, with the same folders,
    bottom first: the page a newcomer reads is the map the checks hold."""
    s = _structure()
    page = _page_layers((ROOT / "docs" / "design.md").read_text(encoding="utf-8"))
    assert page == [(name, sorted(folders)) for name, folders in s.LAYERS]

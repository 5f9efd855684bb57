"""Measure the shape of the llem package: module sizes, long functions, import circles between
modules and between packages, imports that run up the layers (and folders the layer map misses),
imports hidden inside functions, and who touches hydra._internal. `lint-imports` checks the same
layers and circles with import-linter's contracts (pyproject.toml).

    python scripts/structure.py            # print the figures
    python scripts/structure.py --check    # exit 1 when a limit is broken (tests run this)

Every import counts: module level, inside functions, and under `if TYPE_CHECKING:`. A relative
import is resolved against its module. `from pkg import name` counts as an import of `pkg.name`
when that is a module, else of `pkg`.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "llem"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400

# Layers, bottom first: a module may import its own layer and the layers below it. Each folder of
# llem (a first-level package or module) sits in exactly one layer, the same as in pyproject.toml's
# import-linter `layers` contract (tests/test_structure.py keeps the two in step). The package's
# own `__init__` (the public API) sits above them all; entry points (`__main__` modules) may
# import upward. A module whose folder is in no layer is an error, not a guess.
LAYERS: list[tuple[str, list[str]]] = [
    ("base", ["llem.errors", "llem.atomic", "llem.version", "llem.cache", "llem.plain"]),
    ("config", ["llem.config", "llem.conf"]),
    ("vocabulary", ["llem.vocabulary"]),
    ("result", ["llem.result"]),
    ("figures", ["llem.figures", "llem.quality"]),
    ("devices", ["llem.devices"]),
    ("measure", ["llem.measure"]),
    ("adapter", ["llem.hydra"]),
    ("backends", ["llem.backends"]),
    ("run", ["llem.runner"]),
    ("sweep", ["llem.sweep"]),
    ("tracking", ["llem.tracking"]),
    ("report", ["llem.report"]),
    ("app", ["llem.app", "llem.api", "llem.gpu", "llem.testing", "llem.__main__"]),
]


class UnplacedModule(Exception):
    """A module whose folder is in no layer of LAYERS."""


def _entry_point(module: str) -> bool:
    return module == "llem" or module.endswith(".__main__")


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def folder_of(module: str) -> str:
    """The folder a module sits in: ``llem.measure.energy`` -> ``llem.measure``."""
    return ".".join(module.split(".")[:2])


def layer_of(module: str) -> int:
    """The index in LAYERS of the module's folder; the package itself is above every layer."""
    if module == PACKAGE:
        return len(LAYERS)
    folder = folder_of(module)
    for index, (_, folders) in enumerate(LAYERS):
        if folder in folders:
            return index
    raise UnplacedModule(f"{module}: its folder {folder} is in no layer of LAYERS")


def is_placed(module: str) -> bool:
    return module == PACKAGE or any(folder_of(module) in folders for _, folders in LAYERS)


def layer_map_problems(modules: set[str]) -> list[str]:
    """What is wrong with LAYERS against the package's modules: a folder in two layers, a folder
    that matches no module, a module whose folder is in no layer."""
    listed = [f for _, folders in LAYERS for f in folders]
    problems = [f"{f}: in more than one layer" for f in sorted(set(listed)) if listed.count(f) > 1]
    problems += [
        f"{f}: matches no module" for f in listed if not any(folder_of(m) == f for m in modules)
    ]
    problems += [f"{m}: its folder is in no layer" for m in sorted(modules) if not is_placed(m)]
    return problems


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path, known: set[str]) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    function_lines: list[tuple[int, int]] = [
        (n.lineno, n.end_lineno or n.lineno)
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]

    def inside(line: int) -> bool:
        return any(a <= line <= b for a, b in function_lines)

    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in known else base)
        else:
            continue
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                while target not in known and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target != module:
                    yield Import(module, target, node.lineno, inside(node.lineno))


def all_imports() -> list[Import]:
    modules = package_modules()
    known = set(modules)
    found = {imp for name, path in modules.items() for imp in imports_of(name, path, known)}
    return sorted(found, key=lambda i: (i.source, i.line, i.target))


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected components with more than one module: modules that reach each other."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.source, set()).add(imp.target)
    reach = {v: _reachable(graph, v) for v in graph}
    found: list[list[str]] = []
    placed: set[str] = set()
    for v in sorted(graph):
        if v in placed:
            continue
        component = sorted({v} | {w for w in reach[v] if v in reach.get(w, set())})
        placed.update(component)
        if len(component) > 1:
            found.append(component)
    return found


def _is_parent_package(source: str, target: str) -> bool:
    # `import llem.x.y` runs llem/__init__ and llem/x/__init__: importing one's own parent
    # package is not a dependency on what sits above.
    # The top package is the exception: its __init__ is the public API and imports everything.
    return target != PACKAGE and source.startswith(target + ".")


def upward(imports: list[Import]) -> list[Import]:
    return [
        imp
        for imp in imports
        if not _entry_point(imp.source)
        and layer_of(imp.target) > layer_of(imp.source)
        and not _is_parent_package(imp.source, imp.target)
    ]


def _siblings(source: str, target: str) -> tuple[str, str] | None:
    """The two children of the deepest package holding both modules, or None when one module
    holds the other: ``llem.backends.server.gpus`` -> ``llem.backends.pytorch.load`` gives
    ``llem.backends.server`` -> ``llem.backends.pytorch``."""
    a, b = source.split("."), target.split(".")
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    if n in (len(a), len(b)):
        return None
    return ".".join(a[: n + 1]), ".".join(b[: n + 1])


def package_cycles(imports: list[Import]) -> list[list[str]]:
    """Packages (or modules) under one parent that import each other, through any of their
    modules, at any depth: the circles import-linter's acyclic_siblings contract forbids."""
    edges = [
        Import(pair[0], pair[1], imp.line, imp.in_function)
        for imp in imports
        if (pair := _siblings(imp.source, imp.target)) is not None
    ]
    return cycles(edges)


@dataclass(frozen=True)
class Function:
    module: str
    name: str
    lines: int


def functions() -> list[Function]:
    out: list[Function] = []
    for name, path in package_modules().items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                out.append(Function(name, node.name, (node.end_lineno or start) - start + 1))
    return sorted(out, key=lambda f: -f.lines)


def module_lines() -> list[tuple[str, int]]:
    sizes = [(n, len(p.read_text().splitlines())) for n, p in package_modules().items()]
    return sorted(sizes, key=lambda s: -s[1])


def hydra_internal_users() -> list[str]:
    """The project's Python files (what git tracks, or the source folders without it) that name
    Hydra's internals; build outputs and environments are not the project's."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        paths = [ROOT / p for p in listed]
    except (OSError, subprocess.CalledProcessError):
        folders = ("llem", "hydra_plugins", "tests", "bench", "scripts")
        paths = [p for f in folders for p in (ROOT / f).rglob("*.py")]
    return [
        str(p.relative_to(ROOT))
        for p in sorted(paths)
        if p.is_file() and "hydra._internal" in p.read_text()
    ]


def _print_list(title: str, items: list[str]) -> None:
    print(f"{title}: {len(items)}")
    for item in items:
        print(f"  {item}")


def import_problems(imports: list[Import], modules: set[str]) -> bool:
    """Print the layer map's problems, the circles between modules and between packages, and the
    imports that run up the layers; True when any is found."""
    problems = layer_map_problems(modules)
    _print_list("problems of the layer map (LAYERS)", problems)
    placed = [i for i in imports if is_placed(i.source) and is_placed(i.target)]
    circles = cycles(imports)
    _print_list("import circles", [" <-> ".join(c) for c in circles])
    package_circles = [c for c in package_cycles(imports) if c not in circles]
    _print_list("circles between packages", [" <-> ".join(c) for c in package_circles])
    up = upward(placed)
    _print_list("imports running up the layers", [f"{i.source}:{i.line} -> {i.target}" for i in up])
    return bool(problems or circles or package_circles or up)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a limit is broken")
    parser.add_argument("--top", type=int, default=10, help="how many of each list to print")
    args = parser.parse_args(argv)
    imports = all_imports()
    sizes = module_lines()
    funcs = functions()
    hidden = [i for i in imports if i.in_function]
    internal = [u for u in hydra_internal_users() if not u.startswith(("llem/app/", "llem/hydra/"))]
    internal = [u for u in internal if u != "scripts/structure.py"]

    print(f"modules: {len(sizes)}, lines: {sum(s for _, s in sizes)}")
    big = [(n, s) for n, s in sizes if s > MAX_MODULE_LINES]
    print(f"modules over {MAX_MODULE_LINES} lines: {len(big)}")
    for n, s in sizes[: args.top]:
        print(f"  {s:5d}  {n}")
    long = [f for f in funcs if f.lines > MAX_FUNCTION_LINES]
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(long)}")
    for f in funcs[: args.top]:
        print(f"  {f.lines:5d}  {f.module}::{f.name}")
    layered_badly = import_problems(imports, {n for n, _ in sizes})
    print(f"imports of llem's own modules inside functions: {len(hidden)}")
    _print_list("files outside llem/app/ and llem/hydra/ that name hydra._internal", internal)
    broken = bool(big or long or layered_badly or internal)
    return 1 if (args.check and broken) else 0


if __name__ == "__main__":
    sys.exit(main())

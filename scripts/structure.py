"""Measure the shape of the llem package: module sizes, long functions, import circles, imports
that run up the layers, imports hidden inside functions, and who touches hydra._internal.

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

# Layers, bottom first: a module may import its own layer and the layers below it. The longest
# matching prefix decides. Entry points (`__main__` modules), the package's own `__init__` (the
# public API) and the test doubles (`llem.testing`) sit at the top.
LAYERS: list[tuple[str, list[str]]] = [
    ("base", ["llem.errors", "llem.atomic", "llem.version", "llem.cache"]),
    ("config", ["llem.config"]),
    ("vocabulary", ["llem.vocabulary", "llem.backends.base"]),
    ("result", ["llem.result", "llem.generations"]),
    ("figures", ["llem.figures", "llem.quality", "llem.compute", "llem.latency"]),
    ("devices", ["llem.devices"]),
    ("measure", ["llem.measure"]),
    (
        "adapter",
        ["llem.hydra.overrides", "llem.hydra.compose", "llem.hydra.errors", "llem.overrides"],
    ),
    ("backends", ["llem.backends"]),
    (
        "run",
        ["llem.runner", "llem.lifecycle", "llem.prompts", "llem.preflight", "llem.environment"],
    ),
    ("sweep", ["llem.sweep"]),
    ("report", ["llem.report"]),
    ("app", ["llem.app", "llem.main", "llem.cli", "llem.api", "llem.gpu", "llem.testing"]),
    ("top", ["llem"]),
]


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


def layer_of(module: str) -> int:
    if _entry_point(module):
        return len(LAYERS) - 1
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), index)
    return best[1] if best else len(LAYERS) - 1


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
        if layer_of(imp.target) > layer_of(imp.source)
        and not _is_parent_package(imp.source, imp.target)
    ]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a limit is broken")
    parser.add_argument("--top", type=int, default=10, help="how many of each list to print")
    args = parser.parse_args(argv)
    imports = all_imports()
    sizes = module_lines()
    funcs = functions()
    circles = cycles(imports)
    up = upward(imports)
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
    print(f"import circles: {len(circles)}")
    for c in circles:
        print("  " + " <-> ".join(c))
    print(f"imports running up the layers: {len(up)}")
    for i in up:
        print(f"  {i.source}:{i.line} -> {i.target}")
    print(f"imports of llem's own modules inside functions: {len(hidden)}")
    print(f"files outside llem/app/ and llem/hydra/ that name hydra._internal: {len(internal)}")
    for u in internal:
        print(f"  {u}")
    broken = bool(big or long or circles or up or internal)
    return 1 if (args.check and broken) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The figures the docs state that a script can recompute, checked against it (or rewritten).

    python scripts/docs_figures.py              # README, CONTRIBUTING and docs/*.md
    python scripts/docs_figures.py --write      # set every marked figure to its value

A figure is marked by an HTML comment right after it, which neither GitHub nor the docs site
shows: ``2,069<!-- figure: tests -->``. The names:

- ``tests``: the tests pytest collects (``pytest --collect-only -q``); ``tests.slow``: those
  marked ``slow``; ``tests.fast``: the rest, the fast loop (``-m "not slow"``). One collection
  (``-m slow``, whose last line gives both counts) answers all three: about 30 s on 2 cores.
- ``default.KEY``: the default configuration's value of ``KEY`` (``llem --cfg job``), e.g.
  ``default.decoder.max_new_tokens``.

A count of tests written without a mark (``1,451 tests``) fails too, unless its sentence holds a
date (a measurement of its day, like CONTRIBUTING's history of the fast loop), and so does a mark
with an unknown name. ``scripts/docs_commands.py`` runs this check after the docs' commands (CI).
Prints PASS, FAIL or SKIP per figure and exits 1 when one failed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GENERATED = ("configuration.md", "contributing.md")  # generated, or CONTRIBUTING.md included

NUMBER = r"\d[\d,]*(?:\.\d+)?"
MARKED = re.compile(rf"(?P<value>{NUMBER})<!-- figure: (?P<name>[\w.-]+) -->")
UNMARKED_TESTS = re.compile(rf"(?<![\w.,]){NUMBER} tests\b")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
TESTS = ("tests", "tests.slow", "tests.fast")
COLLECT = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow"]
COLLECT += ["-p", "no:cacheprovider"]


@dataclass(frozen=True)
class NoValue:
    """Why a figure has no value here: a failure (``fails``), or a machine that cannot say."""

    reason: str
    fails: bool = True


@dataclass(frozen=True)
class Mark:
    page: str
    line: int
    name: str
    text: str  # the figure as the page writes it


def default_pages() -> list[Path]:
    docs = [p for p in sorted((REPO / "docs").glob("*.md")) if p.name not in GENERATED]
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *docs]


def marks(path: Path) -> list[Mark]:
    text = path.read_text()
    return [
        Mark(path.name, text.count("\n", 0, m.start()) + 1, m["name"], m["value"])
        for m in MARKED.finditer(text)
    ]


def sentences(text: str) -> list[tuple[int, str]]:
    """The sentences of a text with their offsets: a paragraph (or a code block's line group)
    cut after each ``.``, ``!`` or ``?`` that a capital follows."""
    out = []
    for para in re.finditer(r"(?:[^\n]|\n(?!\s*\n))+", text):
        start = 0
        for end in re.finditer(r"[.!?]\)?\s+(?=[A-Z])", para.group()):
            out.append((para.start() + start, para.group()[start : end.end()]))
            start = end.end()
        out.append((para.start() + start, para.group()[start:]))
    return out


def unmarked_counts(path: Path) -> list[tuple[int, str]]:
    """Counts of tests a page writes without a mark, outside dated sentences."""
    text, found = path.read_text(), []
    for offset, sentence in sentences(text):
        if DATE.search(sentence):
            continue
        for m in UNMARKED_TESTS.finditer(sentence):
            found.append((text.count("\n", 0, offset + m.start()) + 1, m.group()))
    return found


def parse_collection(last_line: str) -> dict[str, int] | NoValue:
    """The counts from pytest's last line of ``--collect-only -q -m slow`` (``332/2069 tests
    collected (1737 deselected) in 30s``), or why it gives none."""
    if re.search(r"\berrors?\b", last_line):
        return NoValue(f"the collection failed: {last_line}")
    if re.search(r"\bskipped\b", last_line):
        why = f"test modules were skipped at collection (an extra missing here?): {last_line}"
        return NoValue(why, fails=False)
    m = re.search(r"\b(\d+)/(\d+) tests? collected", last_line)
    if m:
        slow, total = int(m[1]), int(m[2])
    else:
        m = re.search(r"\b(\d+) tests? collected", last_line)
        if not m:
            return NoValue(f"no count in pytest's last line: {last_line!r}")
        slow = total = int(m[1])  # nothing deselected: every test is slow
    return {"tests": total, "tests.slow": slow, "tests.fast": total - slow}


def collect_tests() -> dict[str, int] | NoValue:
    proc = subprocess.run(COLLECT, cwd=REPO, capture_output=True, text=True, timeout=900)
    lines = proc.stdout.strip().splitlines() or ["(no output)"]
    return parse_collection(lines[-1])


def lookup(config: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(config, dict) or part not in config:
            raise KeyError(key)
        config = config[part]
    return config


def default_config() -> dict[str, Any] | NoValue:
    import yaml

    argv = [sys.executable, "-m", "llem", "--cfg", "job"]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return NoValue(f"llem --cfg job exited {proc.returncode}: {proc.stderr.strip()[-200:]}")
    loaded = yaml.safe_load(proc.stdout)
    return loaded if isinstance(loaded, dict) else NoValue("llem --cfg job printed no mapping")


def values(names: set[str]) -> dict[str, Any]:
    """Each name's value, a ``NoValue`` saying why there is none, or ``None`` for an unknown name.
    The slow sources run only when a page names them."""
    out: dict[str, Any] = {}
    if names & set(TESTS):
        counts = collect_tests()
        out.update(dict.fromkeys(TESTS, counts) if isinstance(counts, NoValue) else counts)
    keys = {n for n in names if n.startswith("default.")}
    if keys:
        config = default_config()
        for name in keys:
            try:
                out[name] = config if isinstance(config, NoValue) else lookup(config, name[8:])
            except KeyError:
                out[name] = None
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_number(text: str) -> float:
    return float(text.replace(",", ""))


def written(value: Any) -> str:
    """A value as the docs write it: thousands with commas (``2,069``), a whole float as an
    integer (``5.0`` as ``5``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def verdict(mark: Mark, value: Any) -> tuple[str, str]:
    if value is None:
        return (
            "FAIL",
            f"no figure is named {mark.name!r} (tests, tests.slow, tests.fast, default.KEY)",
        )
    if isinstance(value, NoValue):
        return ("FAIL" if value.fails else "SKIP"), value.reason
    if not _number(value):
        return "FAIL", f"{mark.name} is {value!r}, not a number"
    if as_number(mark.text) != value:
        return (
            "FAIL",
            f"the page says {mark.text}, {mark.name} is {written(value)}: --write sets it",
        )
    return "PASS", f"{mark.name} = {written(value)}"


def check(pages: list[Path]) -> list[tuple[str, str, str]]:
    """(verdict, page:line and the figure, detail) for every mark and unmarked count."""
    found = [m for p in pages for m in marks(p)]
    known = values({m.name for m in found})
    rows = [(*verdict(m, known.get(m.name)), m) for m in found]
    out = [(v, f"{m.page}:{m.line}  {m.text}", d) for v, d, m in rows]
    for page in pages:
        for line, text in unmarked_counts(page):
            why = "a count of tests no check sees: mark it <!-- figure: tests... --> or date it"
            out.append(("FAIL", f"{page.name}:{line}  {text}", why))
    return out


def write(pages: list[Path]) -> int:
    """Set every marked figure to its value; returns how many changed."""
    found = [m for p in pages for m in marks(p)]
    known = values({m.name for m in found})
    changed = 0

    def new(m: re.Match) -> str:
        nonlocal changed
        value = known.get(m["name"])
        if verdict(Mark("", 0, m["name"], m["value"]), value)[0] != "FAIL" or not _number(value):
            return m.group()
        changed += 1
        return f"{written(value)}<!-- figure: {m['name']} -->"

    for page in pages:
        text = page.read_text()
        page.write_text(MARKED.sub(new, text))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="default: README, CONTRIBUTING, docs")
    parser.add_argument("--write", action="store_true", help="set every marked figure")
    args = parser.parse_args(argv)
    pages = args.pages or default_pages()
    if args.write:
        print(f"{write(pages)} figure(s) changed")
        return 0
    rows = check(pages)
    for v, where, detail in rows:
        print(f"{v}  {where}  [{detail}]", flush=True)
    counts = {k: sum(r[0] == k for r in rows) for k in ("PASS", "FAIL", "SKIP")}
    print(", ".join(f"{n} {k.lower()}" for k, n in counts.items()))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())

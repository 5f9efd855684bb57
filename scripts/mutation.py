"""Mutation testing: which small changes to a module its tests fail on, module by module.

    python scripts/mutation.py                        # MODULES but SLOW, each against its tests
    python scripts/mutation.py llem/figures/bins.py   # one module (a path or a glob)
    python scripts/mutation.py llem/quality/scorers.py --tests tests/quality/test_scorers.py
    python scripts/mutation.py llem/quality/*.py --json q.json   # the figures as JSON too
    python scripts/mutation.py llem/quality/scorers.py --rerun q.json   # its survivors again

Each module is mutated by mutmut (pyproject's ``dev`` extra) in its own copy of the checkout under
``.cache-mutation/<module>/`` (the checkout is never touched): mutmut writes every mutant of the
module's functions into ``mutants/`` there, runs the module's tests (``TESTS``, marker
``not slow``) once to learn which tests reach which function, then each mutant against the tests
that reach its function. The tests import the mutated copy: ``PYTHONPATH`` is cleared, mutmut puts
``mutants/`` first on ``sys.path``, and mutmut stops if a mutant planted to fail every test does
not fail them.

Per module it prints the mutants, those killed (a test failed), survived (every test passed, or
no test reached the mutant), timed out (counted as killed, as mutmut's own score does: the tests
did not finish within mutmut's CPU-time limit) and the kill rate: (killed + timed out) over the
mutants not judged equivalent, against ``--target`` (85 %). A mutant judged equivalent (no input
tells it from the module: it changes nothing a caller can see) is listed in
``scripts/mutation_equivalent.toml`` with its mutated line and the reason; an entry whose line no
longer matches the mutant of that name is reported stale and not used. Then every survivor, with
its changed lines. ``mutmut show NAME`` in the module's folder prints a survivor's whole diff.

``--rerun FILE`` (an earlier run's ``--json``) runs only that run's survivors again, after a test
was written for them, and counts its other mutants as it found them (adding tests cannot revive
a killed mutant). A module in ``SLOW`` is left out of the default run, with the reason; named, it
runs.

Exits 0 when every module reaches the target, 1 when one does not, 2 on bad input (an unknown
module, mutmut not installed). It takes minutes per module on two cores; prefix ``nice -n 15``
on a shared machine.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".cache-mutation"
EQUIVALENT = REPO / "scripts" / "mutation_equivalent.toml"
TARGET = 85.0

MODULES = [
    "llem/figures/attribution.py",
    "llem/figures/energy_fit.py",
    "llem/figures/step_shares.py",
    "llem/figures/share_weights.py",
    "llem/figures/interval.py",
    "llem/runner/lag.py",
    "llem/measure/span_energy.py",
    "llem/figures/bins.py",
    "llem/figures/draft_energy.py",
    "llem/quality/*.py",
    "llem/measure/uncertainty.py",
    "llem/measure/interval.py",
]
# left out of the default run, with the reason (named on the command line, they run)
SLOW = {
    "llem/quality/lm_eval_task.py": "the tests that reach it run lm-eval's own tasks, up to 12 s "
    "each: of its 450 mutants, 303 took 29 min on two shared cores",
}
# (module glob, the tests run against its mutants), first match first
TESTS: list[tuple[str, list[str]]] = [
    ("llem/figures/attribution.py", ["tests/attribution"]),
    ("llem/figures/energy_fit.py", ["tests/attribution"]),
    ("llem/figures/bins.py", ["tests/attribution"]),
    ("llem/figures/step_shares.py", ["tests/attribution"]),
    ("llem/figures/share_weights.py", ["tests/attribution"]),
    ("llem/figures/interval.py", ["tests/attribution"]),
    ("llem/runner/lag.py", ["tests/attribution"]),
    ("llem/measure/span_energy.py", ["tests/attribution", "tests/measure"]),
    (
        "llem/figures/draft_energy.py",
        ["tests/figures/test_draft_energy.py", "tests/speculative/test_draft_energy_truth.py"],
    ),
    ("llem/quality/*.py", ["tests/quality"]),
    ("llem/measure/*.py", ["tests/measure"]),
    ("llem/figures/*.py", ["tests/figures"]),
]
# what the tests need beside llem/ and tests/ (pytest's pythonpath has bench/)
ALSO_COPY = ["bench", "hydra_plugins", "conf", "docs"]  # docs: tests read its pages
KILLED = {"killed"}
TIMEOUT = {"timeout"}
SURVIVED = {"survived", "no tests"}


class BadInput(Exception):
    """A module or option the script cannot run: one line, exit 2."""


class MutmutFailed(Exception):
    """``mutmut run`` stopped (its clean tests failed, say): the module has no figures."""


@dataclass
class Equivalent:
    mutant: str
    line: str
    reason: str


@dataclass
class Survivor:
    name: str
    status: str
    change: list[str]
    reason: str | None = None  # why it is judged equivalent; None when it is not


@dataclass
class Outcome:
    module: str
    tests: list[str]
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[Survivor] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    error: str | None = None  # why mutmut gave no figures (the end of its log)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def equivalent(self) -> int:
        return sum(1 for s in self.survivors if s.reason is not None)

    @property
    def killed(self) -> int:
        return sum(n for k, n in self.counts.items() if k in KILLED | TIMEOUT)

    @property
    def rate(self) -> float | None:
        judged = self.total - self.equivalent
        return None if judged <= 0 else 100.0 * self.killed / judged


def modules_of(patterns: list[str]) -> list[str]:
    """The module files the patterns name (a path or a glob, relative to the checkout)."""
    out: list[str] = []
    for p in patterns:
        found = sorted(str(f.relative_to(REPO)) for f in REPO.glob(p) if f.suffix == ".py")
        if not found:
            raise BadInput(f"module {p!r}: no such Python file under {REPO}")
        out += [f for f in found if f not in out and Path(f).name != "__init__.py"]
    return out


def tests_of(module: str) -> list[str]:
    for pattern, tests in TESTS:
        if fnmatch.fnmatch(module, pattern):
            return tests
    raise BadInput(f"module {module!r}: no tests in TESTS for it; name them with --tests")


def prepare(module: str, tests: list[str], marker: str) -> Path:
    """A fresh copy of the checkout's code and tests for one module, with mutmut's settings."""
    work = WORK / module.replace("/", "-").removesuffix(".py")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")
    for name in ["llem", "tests", *ALSO_COPY]:
        shutil.copytree(REPO / name, work / name, ignore=skip)
    settings = {
        "source_paths": ["llem"],
        "only_mutate": [module],
        "also_copy": ALSO_COPY,
        "pytest_add_cli_args_test_selection": tests,
        "pytest_add_cli_args": ["-m", marker, "-p", "no:cacheprovider"],
    }
    lines = ["", "[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    pyproject = (REPO / "pyproject.toml").read_text() + "\n".join(lines) + "\n"
    (work / "pyproject.toml").write_text(pyproject)
    return work


def run_mutmut(work: Path, max_children: int, names: list[str]) -> None:
    """``mutmut run`` in the module's folder (only the mutants ``names``, where given), its
    output in ``mutmut.log`` there."""
    mutmut = Path(sys.executable).parent / "mutmut"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [str(mutmut), "run", "--max-children", str(max_children), *names]
    with open(work / "mutmut.log", "w") as log:
        proc = subprocess.run(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = (work / "mutmut.log").read_text(errors="replace").splitlines()[-15:]
        head = f"mutmut run failed in {work} (exit {proc.returncode}):"
        raise MutmutFailed("\n".join([head, *tail]))


def load_equivalents() -> dict[str, Equivalent]:
    if not EQUIVALENT.exists():
        return {}
    try:
        from tomllib import loads
    except ImportError:  # Python 3.10: mutmut brings the toml package there
        from toml import loads  # type: ignore[no-redef]
    entries = loads(EQUIVALENT.read_text()).get("equivalent", [])
    return {e["mutant"]: Equivalent(e["mutant"], e["line"], e["reason"]) for e in entries}


def changed_lines(diff: str) -> list[str]:
    """The removed and added lines of a mutant's diff (``-`` and ``+``, stripped)."""
    keep = [x for x in diff.splitlines() if x[:1] in "+-" and x[:3] not in ("+++", "---")]
    return [x[0] + " " + x[1:].strip() for x in keep]


def collect(module: str, work: Path, equivalents: dict[str, Equivalent], out: Outcome) -> None:
    """The mutants' statuses from mutmut's files in ``work``, and each survivor's change."""
    from mutmut.configuration import reset_config
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    here = Path.cwd()
    os.chdir(work)
    try:
        reset_config()
        data = SourceFileMutationData(path=module)
        data.load()
        for name, code in sorted(data.exit_code_by_key.items()):
            status = status_by_exit_code[code]
            if status == "not checked":  # left out of a rerun: counted from the earlier run
                continue
            out.counts[status] = out.counts.get(status, 0) + 1
            if status in KILLED | TIMEOUT:
                continue
            change = changed_lines(get_diff_for_mutant(name, path=module))
            eq = equivalents.get(name)
            added = " ".join(x[2:] for x in change if x.startswith("+"))
            if eq is not None and eq.line != added:
                out.stale.append(name)
                eq = None
            out.survivors.append(Survivor(name, status, change, eq.reason if eq else None))
    finally:
        os.chdir(here)


def verdict(o: Outcome, target: float) -> str:
    if o.rate is None:
        return "no mutants"
    return "meets" if o.rate >= target else "BELOW"


def print_table(outcomes: list[Outcome], target: float) -> None:
    head = f"{'module':36} {'mutants':>7} {'killed':>6} {'survived':>8} {'timeout':>7} "
    print("\n" + head + f"{'equiv.':>6} {'kill rate':>9}  verdict ({target:g} %)  time")
    for o in outcomes:
        if o.error is not None:
            print(f"{o.module:36} FAILED: {o.error}")
            continue
        c = o.counts
        survived = sum(c.get(k, 0) for k in SURVIVED)
        rate = "-" if o.rate is None else f"{o.rate:.1f} %"
        print(
            f"{o.module:36} {o.total:7} {c.get('killed', 0):6} {survived:8} "
            f"{c.get('timeout', 0):7} {o.equivalent:6} {rate:>9}  {verdict(o, target):18} "
            f"{o.seconds / 60:.1f} min"
        )
        other = {k: n for k, n in c.items() if k not in KILLED | TIMEOUT | SURVIVED}
        if other:
            print(f"{'':36} also: {other}")


def print_survivors(outcomes: list[Outcome]) -> None:
    for o in outcomes:
        if not o.survivors:
            continue
        print(f"\n{o.module}: {len(o.survivors)} survivors (tests: {' '.join(o.tests)})")
        for s in o.survivors:
            tag = f"equivalent: {s.reason}" if s.reason else s.status
            print(f"  {s.name}  [{tag}]")
            for line in s.change:
                print(f"      {line}")
        for name in o.stale:
            print(f"  stale entry in {EQUIVALENT.name}: {name} (its mutated line changed)")


def run_module(
    module: str, args: argparse.Namespace, eq: dict[str, Equivalent], earlier: dict | None
) -> Outcome:
    """One module's figures; with ``earlier`` (its row of a ``--json`` file), only that run's
    survivors are run again, its other mutants counted as it found them."""
    tests = args.tests or tests_of(module)
    names = [s["name"] for s in earlier["survivors"]] if earlier else []
    what = f"the {len(names)} survivors of {args.rerun}" if earlier else "every mutant"
    print(f"{module}: {what}, against {' '.join(tests)} (-m {args.marker!r})", flush=True)
    start = time.monotonic()
    out = Outcome(module, tests, 0.0)
    if earlier is None or names:
        work = prepare(module, tests, args.marker)
        try:
            run_mutmut(work, args.max_children, names)
        except MutmutFailed as exc:
            return Outcome(module, tests, time.monotonic() - start, error=str(exc))
        collect(module, work, eq, out)
    out.seconds = time.monotonic() - start
    if earlier is not None:
        _merge(out, earlier)
    return out


def _merge(out: Outcome, earlier: dict) -> None:
    """The earlier run's counts, its survivors replaced by what they are now."""
    counts = dict(earlier["counts"])
    for s in earlier["survivors"]:
        counts[s["status"]] -= 1
    for k, n in out.counts.items():
        counts[k] = counts.get(k, 0) + n
    if sum(counts.values()) != sum(earlier["counts"].values()) or len(out.survivors) > len(
        earlier["survivors"]
    ):
        raise BadInput(f"{out.module}: its mutants are not the earlier run's; run it whole")
    out.counts = {k: n for k, n in counts.items() if n}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("modules", nargs="*", default=MODULES, help="module paths or globs")
    p.add_argument("--tests", nargs="+", help="the tests to run (default: TESTS for the module)")
    p.add_argument("--marker", default="not slow", help="pytest -m (default: %(default)s)")
    p.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    p.add_argument("--target", type=float, default=TARGET, help="kill rate, %% (default: 85)")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    p.add_argument(
        "--rerun",
        type=Path,
        help="a --json file of an earlier run: run only its survivors again (after a new test)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        import mutmut  # noqa: F401
    except ImportError:
        hint = "LLEM_EXTRAS=dev bash scripts/setup.sh"
        print(f"error: mutmut is not installed: {hint}", file=sys.stderr)
        return 2
    try:
        modules = modules_of(args.modules)
        if args.modules == MODULES:
            for m in [m for m in modules if m in SLOW]:
                print(f"{m}: left out ({SLOW[m]}); name it to run it")
            modules = [m for m in modules if m not in SLOW]
        for m in modules if not args.tests else []:
            tests_of(m)  # every module has its tests before the first one runs
        eq = load_equivalents()
        earlier = {}
        if args.rerun:
            earlier = {row["module"]: row for row in json.loads(args.rerun.read_text())}
            if missing := [m for m in modules if m not in earlier]:
                raise BadInput(f"--rerun {args.rerun}: no figures for {', '.join(missing)}")
        outcomes = [run_module(m, args, eq, earlier.get(m)) for m in modules]
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_table(outcomes, args.target)
    print_survivors(outcomes)
    if args.json:
        rows = [
            dict(
                module=o.module,
                tests=o.tests,
                seconds=round(o.seconds),
                error=o.error,
                counts=o.counts,
                equivalent=o.equivalent,
                kill_rate=o.rate,
                survivors=[s.__dict__ for s in o.survivors],
            )
            for o in outcomes
        ]
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    below = [o for o in outcomes if o.error or (o.rate is not None and o.rate < args.target)]
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the commands the docs show, and say which pass.

    python scripts/docs_commands.py              # every page of docs/ and the README
    python scripts/docs_commands.py docs/guide.md --real --timeout 900

The commands are the lines of the pages' ```bash blocks (a trailing ``\\`` continues a line; a
``# ...`` comment is dropped). A command that needs what this machine may not have is not run, and
the line says why: ``gpu`` (an NVIDIA GPU, root), ``cluster`` (SLURM), ``server`` (the vLLM
environment), ``running server`` (the server at ``server.url`` that the reader runs: pre-flight
asks it what it serves, a dry run too), ``tracker`` (an MLflow server or wandb, the tracking
extra: tests/tracking runs these commands against a real server and W&B's offline files),
``llamacpp`` (llama-cpp-python's server, built from source), ``network`` (pip or the hub),
``yours`` (a file or directory the reader brings: ``DIR``, ``<...>``, ``/models/...``, an
example sweep), ``slow`` (benches, the test suite: minutes each) and ``writes`` (writes into the
checkout; a test covers it). The rules are ``SKIPS`` below, first match first; a new command
that fits none of them runs.

A llem run is run as a dry run (``dry_run=true``: composed, validated and pre-flighted, nothing
loaded), its directory in a temporary folder, so the check takes seconds per command; ``--real``
runs it as written. A run whose pre-flight refuses it for what this machine lacks
(``REFUSED_HERE``: a node boundary of which no part can be read, a Redfish service that does
not answer, an ElectricityMaps zone without its key or its API) passes with that refusal, the
outcome its page documents for such a machine. ``--vllm-python PY`` runs only the commands of
the vLLM environment's interpreter (``.venv-vllm/bin/python ...``), with PY, where that
environment exists (CI's vLLM part); ``--llamacpp`` only those that need llama-cpp-python
(CI's llama.cpp part, once it is installed). Other commands run as written, from the checkout,
each page's in order (a page may build what its next command uses); ``--jobs`` pages run at once
(2: both of CI's cores; a command mostly waits for a Python process to start). Prints PASS, FAIL
or SKIP per command, page by page, and exits 1 when one failed.

Each command runs in a shell of its own, with this environment's programs, so a page that shows
``llem`` without first activating the environment would pass here and fail for its reader: on the
pages a reader starts from a fresh clone with (``FRESH_PAGES``), a command of the environment
(``llem``, ``python``, ...) before the page's ``source .venv/bin/activate`` fails, and the
activation itself runs as this environment's. Then, unless ``--vllm-python`` or ``--llamacpp``,
the figures the pages state that a script can recompute are checked (``scripts/docs_figures.py``:
test counts by one ``pytest --collect-only``, the default configuration's values).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# (category, regular expressions that mark a command): the first match decides.
SKIPS: list[tuple[str, tuple[str, ...]]] = [
    ("gpu", (r"device=cuda", r"^sudo ", r"gpu_acceptance", r"llem\.gpu ", r"gpu\.power_limit_w")),
    ("cluster", (r"slurm",)),
    ("server", (r"\.venv-vllm", r"\+backend=vllm", r"--vllm")),
    ("running server", (r"server\.url=",)),
    ("tracker", (r"mlflow server", r"\+tracking=mlflow", r"--to-mlflow")),
    ("tracker", (r"\+tracking=wandb", r"--to-wandb", r"^wandb ")),
    ("llamacpp", (r"server\.launch=llamacpp", r"stack=llamacpp_server")),
    ("network", (r"pip install", r"wheels\.sh", r"scripts/setup\.sh", r"build_llamacpp\.sh")),
    ("network", (r"=HuggingFaceTB/", r"=org/", r"dataset\.task=gsm8k")),  # gsm8k: the hub's data
    ("yours", (r"<[a-z]", r"\bDIR\b", r"=/models/", r"my_prompts", r"trace\.csv", r"sweepA")),
    ("yours", (r"my_study", r"outputs/multirun/20")),
    ("slow", (r"bench/", r"pytest", r"test_oldest_stack")),
    ("writes", (r"> docs/", r"> conf/")),
]

# The pages a reader follows from a fresh clone, where nothing of .venv is on PATH until the page
# activates it; the programs that are there only then.
FRESH_PAGES = ("README.md", "install.md")
ACTIVATE = re.compile(r"^(?:source|\.) \.venv/bin/activate$")
ENV_PROGRAMS = ("llem", "llem-report", "python", "mkdocs", "pytest", "ruff", "mypy", "pre-commit")

# (a command's mark, the line its pre-flight refuses it with): a llem run refused this way (exit 3)
# on a machine without what it measures does what its page says it does there, and passes.
REFUSED_HERE: list[tuple[str, str]] = [
    (r"measurement\.boundary=node", "measurement.boundary=node: no part of the node can be read"),
    (r"chassis\.source=redfish", "chassis.source=redfish but Redfish GET "),  # no BMC here
    # no ElectricityMaps key here (CI holds none), or a key but no way out to the API
    (r"carbon\.zone=", "needs an ElectricityMaps API key: set ELECTRICITYMAPS_API_KEY"),
    (r"carbon\.zone=", "ElectricityMaps GET https://api.electricitymaps.com/"),
]

LLEM_RUN = re.compile(r"^(?:\.venv(?:-vllm)?/bin/)?(?:llem|python3? -m llem)(?=\s|$)")
VLLM_PYTHON = ".venv-vllm/bin/python"  # the docs' vLLM environment (scripts/setup.sh --vllm)
PROGRAMS = {
    "llem-report": [sys.executable, "-m", "llem.report"],
    "llem": [sys.executable, "-m", "llem"],
    ".venv/bin/llem": [sys.executable, "-m", "llem"],
    "python": [sys.executable],
    "python3": [sys.executable],
    "mkdocs": [sys.executable, "-m", "mkdocs"],
}


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str


def page_commands(path: Path) -> list[Command]:
    """The commands of a page's ```bash blocks, with the line each starts on."""
    text = path.read_text()
    found = []
    for block in re.finditer(r"(?ms)^```bash\n(.*?)^```", text):
        first = text.count("\n", 0, block.start(1)) + 1
        pending, start = "", 0
        for offset, raw in enumerate(block.group(1).splitlines()):
            if not pending:
                start = first + offset
            line = raw.strip()
            if line.endswith("\\"):
                pending += line[:-1].strip() + " "
                continue
            command = re.split(r"\s+#\s", pending + line, maxsplit=1)[0].strip()
            pending = ""
            if command and not command.startswith("#"):
                found.append(Command(path.name, start, command))
    return found


def _program(command: str) -> str:
    """The program a command starts, past its leading ``VAR=value`` assignments."""
    words = [w for w in command.split() if not re.fullmatch(r"\w+=\S*", w)]
    return words[0] if words else ""


def unactivated(commands: list[Command]) -> dict[int, str]:
    """On a fresh page, the commands (by index) that run a program of the environment before
    the page activates it, each with what its reader meets."""
    found: dict[int, str] = {}
    if not commands or commands[0].page not in FRESH_PAGES:
        return found
    for i, cmd in enumerate(commands):
        if ACTIVATE.match(cmd.text):
            break
        if _program(cmd.text) in ENV_PROGRAMS:
            found[i] = (
                f"on a fresh clone `{_program(cmd.text)}` is not on PATH here: the page shows no "
                "`source .venv/bin/activate` before it (or write `.venv/bin/...`)"
            )
    return found


def skip_reason(command: str, vllm_python: str | None = None, llamacpp: bool = False) -> str | None:
    """Why ``command`` is not run here (None: it runs). With ``vllm_python``, a command of the
    vLLM environment's interpreter runs with that one, unless another rule skips it; with
    ``llamacpp`` (llama-cpp-python is installed here), a command that needs it runs."""
    for category, marks in SKIPS:
        if category == "server" and vllm_python and command.startswith(VLLM_PYTHON + " "):
            continue
        if category == "llamacpp" and llamacpp:
            continue
        hit = next((m for m in map(re.compile, marks) if m.search(command)), None)
        if hit is not None:
            return f"{category} ({hit.pattern!r})"
    return None


def refused_here(command: str, returncode: int, stderr: str) -> str | None:
    """The refusal, when ``command``'s pre-flight refused it for what this machine lacks (one of
    ``REFUSED_HERE``); None otherwise."""
    if returncode != 3:
        return None
    for mark, line in REFUSED_HERE:
        if re.search(mark, command) and line in stderr:
            return line
    return None


def _needs_llamacpp(command: str) -> bool:
    marks = dict(SKIPS)["llamacpp"]
    return any(re.search(m, command) for m in marks)


def argv_text(
    command: str, real: bool, scratch: Path, n: int, vllm_python: str | None = None
) -> str:
    """The shell text to run: the program replaced by this interpreter's (the vLLM
    environment's by ``vllm_python``), and a llem run made a dry run into ``scratch`` unless
    ``real``."""
    llem_run = LLEM_RUN.match(command) is not None and _runs_something(command)
    program, _, rest = command.partition(" ")
    if program == VLLM_PYTHON and vllm_python:
        command = " ".join([_quote(vllm_python), rest])
    elif program in PROGRAMS:
        command = " ".join([*map(_quote, PROGRAMS[program]), rest]).strip()
    elif program.startswith(".venv/bin/python"):
        command = " ".join([_quote(sys.executable), rest])
    elif ACTIVATE.match(command):
        command = f"{program} {_quote(str(Path(sys.executable).parent / 'activate'))}"
    if llem_run and not real:
        multirun = "--multirun" in command
        where = "hydra.sweep.dir" if multirun else "hydra.run.dir"
        if where not in command:
            command += f" {where}={_quote(str(scratch / f'{n}'))}"
        if "dry_run=true" not in command:
            command += " dry_run=true"
    return command


def _runs_something(command: str) -> bool:
    return not any(flag in command.split() for flag in ("--help", "--cfg", "-h"))


def _quote(s: str) -> str:
    return s if re.fullmatch(r"[\w./=:+-]+", s) else "'" + s.replace("'", "'\\''") + "'"


def run(
    cmd: Command,
    real: bool,
    scratch: Path,
    n: int,
    timeout: float,
    vllm_python: str | None = None,
    llamacpp: bool = False,
) -> tuple[str, str]:
    reason = skip_reason(cmd.text, vllm_python, llamacpp)
    if reason is not None:
        return "SKIP", reason
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.pop("DISPLAY", None)
    shell = argv_text(cmd.text, real, scratch, n, vllm_python)
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            ["bash", "-c", shell],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return "FAIL", f"no end after {timeout:.0f} s"
    took = f"{time.perf_counter() - start:.1f} s"
    dry = " (dry run)" if "dry_run=true" in shell and "dry_run=true" not in cmd.text else ""
    if proc.returncode == 0:
        return "PASS", took + dry
    refusal = refused_here(cmd.text, proc.returncode, proc.stderr)
    if refusal is not None:
        return "PASS", f"{took}{dry}: exit 3 here, as the page says ({refusal})"
    tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["(no output)"]
    return "FAIL", f"exit {proc.returncode} after {took}{dry}: {tail[0][:200]}"


def _run_pages(pages: list[Path], args: argparse.Namespace, counts: dict[str, int]) -> None:
    """Run the pages' commands, ``--jobs`` pages at once, printing a line per command."""
    with tempfile.TemporaryDirectory(prefix="llem-docs-") as tmp:
        numbered, blocked, n = [], {}, 0
        for page in pages:
            every = page_commands(page)
            blocked.update({every[i]: why for i, why in unactivated(every).items()})
            cmds = [
                c
                for c in every
                if (not args.vllm_python or c.text.startswith(VLLM_PYTHON + " "))
                and (not args.llamacpp or _needs_llamacpp(c.text))
            ]
            numbered.append([(n + i + 1, c) for i, c in enumerate(cmds)])
            n += len(cmds)

        def one(i: int, c: Command) -> tuple[str, str]:
            if c in blocked:
                return "FAIL", blocked[c]
            return run(c, args.real, Path(tmp), i, args.timeout, args.vllm_python, args.llamacpp)

        def run_page(page: list[tuple[int, Command]]) -> list[tuple[str, str, Command]]:
            return [(*one(i, c), c) for i, c in page]

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for done in pool.map(run_page, numbered):  # in page order, as each page ends
                for verdict, detail, cmd in done:
                    counts[verdict] += 1
                    print(f"{verdict}  {cmd.page}:{cmd.line}  {cmd.text}  [{detail}]", flush=True)


def _check_figures(pages: list[Path] | None, counts: dict[str, int]) -> None:
    """scripts/docs_figures.py's check of the pages' figures (its own pages when None)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "docs_figures", REPO / "scripts" / "docs_figures.py"
    )
    assert spec is not None and spec.loader is not None
    figures = importlib.util.module_from_spec(spec)
    sys.modules["docs_figures"] = figures  # its dataclasses look their module up there
    spec.loader.exec_module(figures)
    for verdict, where, detail in figures.check(pages or figures.default_pages()):
        counts[verdict] += 1
        print(f"{verdict}  {where}  [{detail}]", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="default: docs/*.md and README.md")
    parser.add_argument("--real", action="store_true", help="run llem runs as written")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per command")
    parser.add_argument(
        "--vllm-python",
        metavar="PY",
        help=f"run the commands of {VLLM_PYTHON} with PY, and only those (CI's vLLM part)",
    )
    parser.add_argument(
        "--llamacpp",
        action="store_true",
        help="run the commands that need llama-cpp-python, and only those (CI's llama.cpp part)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="pages run at once (default 2)")
    parser.add_argument(
        "--no-figures", action="store_true", help="leave out the figures' check (docs_figures.py)"
    )
    args = parser.parse_args(argv)
    pages = args.pages or [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    _run_pages(pages, args, counts)
    if not (args.vllm_python or args.llamacpp or args.no_figures):
        _check_figures(args.pages or None, counts)
    print(", ".join(f"{v} {k.lower()}" for k, v in counts.items()))
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""What a newcomer meets on a fresh clone: every command the README shows is run by a test, and
files the documented commands write stay untracked.

The README's commands are the lines of its ```bash blocks (a trailing ``\\`` continues a line, a
``# ...`` comment is not part of the command); its Python is the ```python block. ``RUN_BY`` maps
each command to the test that runs it, or to why no test can; a command added to the README
without an entry fails ``test_every_readme_command_is_run_by_a_test``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llem.testing.cli import llem_env, output, run_llem

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

SWEEP = "llem --multirun pytorch.batch_size=1,4,16 decoder.max_new_tokens=32 'repeat=range(2)'"
REPORT = "llem-report outputs/multirun/2026-11-26/22-55-07"

SETUP_TEST = "tests/test_setup_script.py::test_setup_prints_a_line_per_step_and_logs_pip"

# README command -> "path::test" that runs it, or "skip: why no test runs it".
RUN_BY: dict[str, str] = {
    "bash scripts/setup.sh": SETUP_TEST,
    "LLEM_EXTRAS=dev bash scripts/setup.sh": SETUP_TEST,  # and .ci/run's own setup (dev extra)
    "source .venv/bin/activate": (
        "tests/test_docs_commands.py::test_the_readme_and_install_page_activate_before_llem"
    ),
    "llem": "tests/app/test_entrypoint.py::test_default_model_runs_offline",
    "llem pytorch.batch_size=8 decoder=creative decoder.temperature=0.7": (
        "tests/app/test_newcomer.py::test_the_readme_runs_compose_and_pass_preflight"
    ),
    "llem --cfg job": "tests/app/test_newcomer.py::test_the_readme_runs_compose_and_pass_preflight",
    SWEEP: "tests/app/test_newcomer.py::test_the_readme_sweep_and_its_report",
    REPORT: "tests/app/test_newcomer.py::test_the_readme_sweep_and_its_report",
    'python -m pytest -q -m "not slow"': "skip: the fast test loop itself (a test cannot run it)",
    "python -m pytest -q -n 2": "skip: the whole test suite itself (a test cannot run it)",
    "mkdocs build --strict": "tests/app/test_newcomer.py::test_the_docs_site_builds_strictly",
}


def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the ```language blocks of a Markdown text."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.M | re.S)


def commands(block: str) -> list[str]:
    """A bash block's commands: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", "", block)
    lines = (re.split(r"\s+#\s", line, maxsplit=1)[0].strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def readme_commands() -> list[str]:
    return [c for block in fenced_blocks(README.read_text(), "bash") for c in commands(block)]


def test_every_readme_command_is_run_by_a_test() -> None:
    shown = readme_commands()
    assert shown, "no ```bash block in the README"
    missing = [c for c in shown if c not in RUN_BY]
    assert not missing, f"README commands with no test in RUN_BY: {missing}"
    stale = [c for c in RUN_BY if c not in shown]
    assert not stale, f"RUN_BY names commands the README no longer shows: {stale}"


@pytest.mark.parametrize("command", sorted(RUN_BY))
def test_each_named_test_exists(command: str) -> None:
    where = RUN_BY[command]
    if where.startswith("skip: "):
        return
    path, name = where.split("::")
    assert re.search(rf"^def {name}\(", (REPO / path).read_text(), flags=re.M), where


def test_the_commands_parse_the_way_a_shell_reads_them() -> None:
    block = "llem a=1 \\\n    b=2   # a comment\n# a whole comment\n\nllem-report DIR\n"
    assert commands(block) == ["llem a=1 b=2", "llem-report DIR"]


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout"
)
@pytest.mark.parametrize(
    "path", ["tiny-llama/config.json", "outputs/x/result.json", ".venv/x", "site/index.html"]
)
def test_what_the_readme_commands_write_is_ignored_by_git(path: str) -> None:
    proc = subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", path], cwd=REPO, capture_output=True
    )
    assert proc.returncode == 0, f"{path} is not in .gitignore"


def _console_scripts() -> list[str]:
    """The names under pyproject.toml's ``[project.scripts]`` (read without tomllib: 3.10)."""
    section = (REPO / "pyproject.toml").read_text().split("[project.scripts]", 1)[1]
    lines = section.split("\n[", 1)[0].splitlines()
    return [line.split("=", 1)[0].strip() for line in lines if "=" in line]


def test_the_readme_shows_each_console_script_as_a_command() -> None:
    shown = readme_commands()
    for name in _console_scripts():
        assert any(c == name or c.startswith(f"{name} ") for c in shown), name


@pytest.mark.parametrize("name", sorted(_console_scripts()))
@pytest.mark.slow
def test_each_console_script_runs_where_it_is_installed(name: str) -> None:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable}")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage" in proc.stdout.lower()


def _args(command: str) -> list[str]:
    """A README ``llem ...`` command's arguments, quotes removed as the shell does."""
    import shlex

    return shlex.split(command)[1:]


@pytest.mark.slow
def test_the_readme_runs_compose_and_pass_preflight(tmp_path: Path) -> None:
    """The README's one-run commands: each composes, validates and passes pre-flight (a dry run
    loads nothing); ``--cfg job`` prints the composed configuration."""
    knobs = "llem pytorch.batch_size=8 decoder=creative decoder.temperature=0.7"
    proc = run_llem(*_args(knobs), "dry_run=true", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, output(proc)
    proc = run_llem(*_args("llem --cfg job"), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, output(proc)
    assert "batch_size: 1" in proc.stdout and "max_new_tokens: 64" in proc.stdout


def _readme_table_header() -> list[str]:
    """The column names of the report table the README prints (its first line with ``tok/s``)."""
    for block in fenced_blocks(README.read_text(), "text"):
        for line in block.splitlines():
            if "tok/s" in line:
                return line.split()
    raise AssertionError("the README shows no report table")


@pytest.mark.slow
def test_the_readme_sweep_and_its_report(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The README's sweep: the exact command passes a dry run (6 points, nothing loaded); the same
    grid on the tiny model runs, and ``llem-report`` prints a table with the README's columns."""
    proc = run_llem(*_args(SWEEP), "dry_run=true", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, output(proc)
    assert "6 points" in proc.stdout + proc.stderr
    sweep_dir = tmp_path / "sweep"
    tiny = ["model=hf", f"model.name_or_path={tiny_model_dir}", "measurement.energy=none"]
    short = ["dataset.n_prompts=2", "measurement.warmup=0", f"hydra.sweep.dir={sweep_dir}"]
    proc = run_llem(*_args(SWEEP), *tiny, *short, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, output(proc)
    report = [sys.executable, "-m", "llem.report", str(sweep_dir)]
    proc = subprocess.run(
        report, cwd=tmp_path, env=llem_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, output(proc)
    assert proc.stdout.startswith("llem report: 6 runs (6 ok), 3 configurations"), proc.stdout
    header = next(line.split() for line in proc.stdout.splitlines() if "tok/s" in line)
    # The columns both tables have (the tiny model's short runs have no steady-state window).
    shared = {"batch_size", "tok/s", "J/tok", "status"}
    assert shared <= set(header) and shared <= set(_readme_table_header()), header


@pytest.mark.slow
def test_the_readme_python_api_runs(tmp_path: Path) -> None:
    """The README's three lines of Python, as written, on the default model."""
    (code,) = fenced_blocks(README.read_text(), "python")
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=llem_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, output(proc)
    status, tokens_per_s, j_per_token = proc.stdout.split()[-3:]
    assert status == "ok" and float(tokens_per_s) > 0
    assert (tmp_path / "runs" / "bs4" / "result.json").is_file()
    if j_per_token != "None":
        assert float(j_per_token) > 0


@pytest.mark.slow
def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: every page in the nav, no broken link or anchor."""
    pytest.importorskip("material", reason="mkdocs-material is in the dev extra only")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, output(proc)


# How the README's first bullets name each engine, server launch and GPU vendor llem has: a new one
# fails the test below until the README names it (and this table says how).
README_NAMES = {
    "engine pytorch": "PyTorch",
    "engine vllm": "vLLM in llem's process",
    "engine server": "OpenAI-compatible servers",
    "launch vllm": "vLLM's",
    "launch llamacpp": "llama.cpp's",
    "launch sglang": "SGLang's",
    "launch tgi": "TGI's",
    "launch command": "a command",
    "server.url": "already running at a URL",
    "vendor nvidia": "NVML on NVIDIA",
    "vendor amd": "amdsmi on AMD",
    "cpu energy": "RAPL for the CPU packages and DRAM",
}


def test_the_readme_names_every_engine_launch_and_energy_source() -> None:
    from llem.config.engines import ENGINES
    from llem.config.server import Launch
    from llem.devices.gpus import VENDORS

    have = [f"engine {e.name}" for e in ENGINES] + [f"launch {k.value}" for k in Launch]
    have += [f"vendor {name}" for name, _ in VENDORS] + ["server.url", "cpu energy"]
    unnamed = [h for h in have if h not in README_NAMES]
    assert not unnamed, f"name these in the README's first bullets and in README_NAMES: {unnamed}"
    bullets = " ".join(README.read_text().split("\n## ", 1)[0].split())
    missing = [README_NAMES[h] for h in have if README_NAMES[h] not in bullets]
    assert not missing, f"the README's first bullets do not name: {missing}"

"""What a newcomer meets on a fresh clone: files the documented commands write stay untracked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout"
)
@pytest.mark.parametrize("path", ["tiny-llama/config.json", "outputs/x/result.json", ".venv/x"])
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
    readme = (REPO / "README.md").read_text()
    commands = [line.strip() for line in readme.splitlines() if line.startswith("    ")]
    for name in _console_scripts():
        assert any(c.startswith(f"{name} ") or c.endswith(f"/{name}") for c in commands), name


@pytest.mark.parametrize("name", sorted(_console_scripts()))
def test_each_console_script_runs_where_it_is_installed(name: str) -> None:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable}")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage" in proc.stdout.lower()

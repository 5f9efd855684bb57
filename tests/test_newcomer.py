"""What a newcomer meets on a fresh clone: files the documented commands write stay untracked."""

from __future__ import annotations

import shutil
import subprocess
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

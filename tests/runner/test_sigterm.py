"""SIGTERM (SLURM's scancel and time limit, a container's stop, ``timeout``) unwinds a llem
command as Ctrl-C does: a process the engine started (as vLLM's engine core is) is stopped by the
engine's unload, the run's result.json says it was terminated, and the exit status is 143."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llem.testing.cli import llem_env
from llem.testing.proctree import gone

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_sigterm_stops_the_engines_own_process_and_records_the_run(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    run_dir, pidfile = tmp_path / "run", tmp_path / "engine.pid"
    env = {**llem_env(), "PYTHONPATH": os.pathsep.join([str(REPO), llem_env()["PYTHONPATH"]])}
    out = tmp_path / "out.txt"  # a file: a process left running would hold a pipe open
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.runner.sigterm_run", str(tiny_model_dir), str(run_dir),
             str(pidfile)],
            cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    engine = None
    try:
        deadline = time.monotonic() + 240
        while not pidfile.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pidfile.exists(), out.read_text()[-3000:]
        time.sleep(0.2)
        engine = int(pidfile.read_text())
        assert not gone(engine)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        stopped = gone(engine)
    finally:
        if proc.poll() is None:
            proc.kill()
        if engine is not None and not gone(engine):
            os.kill(engine, signal.SIGKILL)
    said = out.read_text()
    assert stopped, said[-3000:]
    assert proc.returncode == 143, said[-3000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed"
    assert result["error"]["message"] == "terminated by SIGTERM (exit 143)"

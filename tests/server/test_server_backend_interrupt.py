"""A launched server's whole process group is gone after the run is interrupted: SIGTERM and
Ctrl-C (SIGINT) while the server starts, once it answers and before the run has set itself up,
and in the run's warm-up, checked by pid (the server and its child)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llem.backends.server.launch import group_alive
from llem.testing.cli import llem_env
from llem.testing.proctree import gone

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("interrupted_run.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("stage", ["starting", "ready", "warm-up"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_the_launched_group_is_gone_after_an_interrupt(
    tiny_model_dir: Path, tmp_path: Path, sig: signal.Signals, stage: str
) -> None:
    marker, pidfile = tmp_path / "marker", tmp_path / "pids"
    args = [str(tiny_model_dir), str(tmp_path / "run"), str(marker), str(pidfile), stage]
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        env=llem_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    waited_for = pidfile if stage == "starting" else marker
    try:
        deadline = time.monotonic() + 240
        while not waited_for.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert waited_for.exists(), proc.stdout.read() if proc.poll() is not None else "no marker"
        time.sleep(0.2)
        child = int(pidfile.read_text())
        pgid = os.getpgid(child)
        assert group_alive(pgid) and not gone(child)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not group_alive(pgid)
    assert gone(child)


def test_sigterm_while_serving_cancels_every_request_cleanly(tmp_path: Path) -> None:
    """SIGTERM inside the client's event loop: every request's task unwinds (none of llem's is
    "destroyed but pending"), the exit is SIGTERM's 143, and the handler in place before the loop
    is put back."""
    marker = tmp_path / "marker"
    env = {**llem_env(), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.server.sigterm_serve", str(marker)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), proc.communicate()[0] if proc.poll() is not None else "no marker"
        proc.send_signal(signal.SIGTERM)
        said, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, said
    # none of llem's tasks left pending (the fake server's own, in its daemon thread, may be)
    llems = ("coro=<HttpClient", "coro=<serve_watched_async", "coro=<drive", "GeneratorExit")
    assert not any(name in said for name in llems), said[-4000:]
    assert "SIGTERM: the requests in flight were cancelled" in said
    assert "handler restored: True" in said

"""Launching a server command: readiness, early exit, timeout, and the whole process group
gone on every way out (checked by pid)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llem.backends.server import launch as launch_module
from llem.backends.server.commands import llamacpp_command, vllm_command
from llem.backends.server.launch import (
    LaunchedServer,
    LaunchSpec,
    ServerLaunchError,
    launch,
)
from llem.testing.proctree import gone

FAKE = Path(__file__).with_name("fake_launch_server.py")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(tmp_path: Path, delay_s: float, mode: str = "ok", **kw: float) -> LaunchedServer:
    port = _port()
    command = [sys.executable, str(FAKE), str(port), str(delay_s), mode, str(tmp_path / "pids")]
    return launch(command, f"http://127.0.0.1:{port}", tmp_path / "logs", **kw)


def _pids(server: LaunchedServer, tmp_path: Path) -> list[int]:
    assert server.pid is not None
    return [server.pid, int((tmp_path / "pids").read_text())]


@pytest.mark.slow
def test_ready_after_a_delay_with_its_record_and_gone_after(tmp_path: Path) -> None:
    with _server(tmp_path, delay_s=1.0) as server:
        record = server.record
        assert record is not None
        assert record.launch_to_ready_s >= 1.0
        assert record.version == "9.9.9" and record.version_reason is None
        assert str(FAKE) in record.command_line
        assert "fake server starting" in Path(record.log_path).read_text()
        pids = _pids(server, tmp_path)
        assert not any(gone(p) for p in pids)
    assert all(gone(p) for p in pids)


@pytest.mark.slow
def test_a_server_without_a_version_gets_its_packages_version(tmp_path: Path) -> None:
    """llama-cpp-python's server answers no /version: the record takes the installed version of
    the package the command runs (planted here: pytest's), and without one says why."""
    port = _port()
    command = (sys.executable, str(FAKE), str(port), "0", "noversion", str(tmp_path / "pids"))
    url = f"http://127.0.0.1:{port}"
    with launch(LaunchSpec(command, package="pytest"), url, tmp_path / "a") as server:
        assert server.record is not None
        assert (server.record.version, server.record.version_reason) == (pytest.__version__, None)
    port = _port()
    command = (sys.executable, str(FAKE), str(port), "0", "noversion", str(tmp_path / "pids"))
    with launch(command, f"http://127.0.0.1:{port}", tmp_path / "b") as server:
        assert server.record is not None and server.record.version is None
        assert "reports no version" in (server.record.version_reason or "")
    spec = llamacpp_command("m.gguf", 8000)
    assert spec.package == "llama_cpp_python"  # the server runs in this interpreter


@pytest.mark.slow
def test_exit_before_ready_is_an_error_with_the_logs_tail(tmp_path: Path) -> None:
    server = _server(tmp_path, delay_s=0.2, mode="exit")
    with pytest.raises(ServerLaunchError, match="exited with code 3") as err:
        server.start()
    assert "planted failure before ready" in str(err.value)
    assert all(gone(p) for p in _pids(server, tmp_path))


@pytest.mark.slow
def test_never_ready_times_out_and_is_stopped(tmp_path: Path) -> None:
    server = _server(tmp_path, delay_s=0.0, mode="never", ready_timeout_s=1.5)
    with pytest.raises(ServerLaunchError, match="not ready within ready_timeout_s=1.5"):
        server.start()
    assert all(gone(p) for p in _pids(server, tmp_path))


@pytest.mark.slow
def test_group_gone_after_an_exception_inside(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="planted"), _server(tmp_path, 0.0) as server:
        pids = _pids(server, tmp_path)
        raise RuntimeError("planted")
    assert all(gone(p) for p in pids)


@pytest.mark.slow
def test_group_gone_after_keyboard_interrupt_inside(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), _server(tmp_path, 0.0) as server:
        pids = _pids(server, tmp_path)
        raise KeyboardInterrupt
    assert all(gone(p) for p in pids)


@pytest.mark.slow
def test_sigterm_ignoring_group_is_killed_after_grace(tmp_path: Path) -> None:
    with _server(tmp_path, 0.0, mode="ignore_term", grace_s=1.0) as server:
        pids = _pids(server, tmp_path)
        t0 = time.monotonic()
    assert time.monotonic() - t0 >= 1.0  # it waited out the grace period first
    assert all(gone(p) for p in pids)


def test_presets_build_the_command_from_typed_keys_and_passthrough() -> None:
    spec = vllm_command(
        "m/dir",
        8123,
        dtype="float32",
        max_num_seqs=4,
        tensor_parallel_size=2,
        cpu_kv_cache_gib=1,
        passthrough={"enforce_eager": True, "max_model_len": 512, "skip": False},
        python="py",
    )
    assert spec.command == (
        *("py", "-m", "vllm.entrypoints.openai.api_server", "--model", "m/dir"),
        *("--host", "127.0.0.1", "--port", "8123", "--dtype", "float32"),
        *("--max-num-seqs", "4", "--tensor-parallel-size", "2"),
        *("--enforce-eager", "--max-model-len", "512"),
    )
    assert spec.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}
    spec = llamacpp_command("a.gguf", 9000, passthrough={"n_ctx": 2048, "verbose": False})
    assert spec.command[1:] == (
        *("-m", "llama_cpp.server", "--model", "a.gguf", "--host", "127.0.0.1"),
        *("--port", "9000", "--n_ctx", "2048", "--verbose", "False"),
    )
    with pytest.raises(ValueError, match="n_parallel=4"):
        llamacpp_command("a.gguf", 9000, n_parallel=4)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_signal_while_the_command_starts_still_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """The signal lands inside Popen, after the child exists and before llem knows it: it is
    delivered once the process is known, and the run's handler unwinds through the stop."""
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def popen_then_signal(*args: Any, **kw: Any) -> subprocess.Popen[bytes]:
        started.append(real_popen(*args, **kw))
        deadline = time.monotonic() + 60
        while not (tmp_path / "pids").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the fake's child exists too
        os.kill(os.getpid(), sig)
        time.sleep(0.2)  # the handler runs here unless the signal waits
        return started[-1]

    def interrupted(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    monkeypatch.setattr(launch_module.subprocess, "Popen", popen_then_signal)
    monkeypatch.setattr(launch_module.LaunchedServer, "_wait_ready", lambda self: time.sleep(30))
    previous = signal.signal(sig, interrupted)
    try:
        with pytest.raises(SystemExit) as stopped:
            _server(tmp_path, delay_s=0.0).start()
        (process,) = started
        leader_stopped = process.poll() is not None  # stopped and reaped
        child_gone = gone(int((tmp_path / "pids").read_text()))  # and its child with it
    finally:
        signal.signal(sig, previous)
        for process in started:  # whatever the outcome, nothing is left running
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    assert stopped.value.code == 128 + sig
    assert leader_stopped and child_gone

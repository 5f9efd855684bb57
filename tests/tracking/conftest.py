"""A real MLflow tracking server for the session (SQLite store, local artifact root, a free port),
and a forwarder in front of it that a test can stop, as a tracker going down mid-sweep.

Tests that need them are marked ``mlflow`` and skip with the reason where mlflow is not importable
(the main environment: the extra ``llem[tracking]`` has its own CI part).
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

# seconds the server may take to answer /health: about 70 s on a loaded 2-core machine
SERVER_START_S = 300.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"mlflow server exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            time.sleep(0.5)
    pytest.fail(f"mlflow server not healthy in {SERVER_START_S:.0f} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``{"uri", "store", "pid"}``: the server's URL, the folder of its database and artifacts,
    and its process (its workers and job runner are its descendants)."""
    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("needs mlflow (pip install 'llem[tracking]')")
    store = tmp_path_factory.mktemp("mlflow-store")
    port = free_port()
    log = store / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "mlflow", "server", "--workers", "1"),
                *("--host", "127.0.0.1", "--port", str(port)),
                *("--backend-store-uri", f"sqlite:///{store / 'mlflow.db'}"),
                *("--default-artifact-root", str(store / "artifacts")),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=store,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, log)
        yield {"uri": url, "store": store, "pid": proc.pid}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        shutil.rmtree(store / "artifacts", ignore_errors=True)


class Forwarder:
    """HTTP requests forwarded to ``upstream``; ``stop_after`` (a path) stops it once that
    request has been answered, after which connections are refused, as from a stopped server."""

    def __init__(self, upstream: str, stop_after: str) -> None:
        forwarder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                req = urllib.request.Request(upstream + self.path, data=body, method=self.command)
                for k in ("Content-Type", "Authorization"):
                    if self.headers.get(k):
                        req.add_header(k, self.headers[k])
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, data = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, data = e.code, e.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                if self.path.split("?")[0].endswith(stop_after):
                    forwarder.stopping.set()

            do_GET = do_POST = do_PATCH = do_DELETE = _forward

        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        threading.Thread(target=self._stop_when_told, daemon=True).start()

    def _stop_when_told(self) -> None:
        self.stopping.wait()
        self.server.shutdown()
        self.server.server_close()

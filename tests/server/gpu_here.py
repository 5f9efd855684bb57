"""A run of ``+backend=server`` in this process as on a machine with a GPU: the NVML double in
``sys.modules`` with the GPUs the test plants (their compute processes too), CUDA said to be
there (nothing of torch's is touched: the server backend runs no model here), and a server the
test starts outside llem's process tree (``detached_server``), as one started by hand."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from llem.measure import devices as measure_devices
from llem.measure.sampler import RealClock
from llem.runner import Runner
from llem.runner import preflight as runner_preflight
from llem.runner import runner as runner_module
from llem.testing.cli import REPO, compose_tiny, llem_env
from llem.testing.fake_pynvml import FakeGpu, FakeNvml
from tests.server.fake_openai import MODEL

#: a measured run, short: no idle baseline, no minimum window, every window long enough
MEASURED = (
    "+backend=server",
    f"server.model={MODEL}",
    "device=cuda",
    "measurement.energy=auto",
    "measurement.idle_baseline_s=0",
    "measurement.min_window_s=0",
    "measurement.min_valid_window_s=0",
    "measurement.warmup=0",
    "traffic.n_requests=4",
)


def install_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., FakeNvml]:
    """Patch this process to look like a CUDA machine; returns ``install(*FakeGpu)``."""
    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(measure_devices, "torch_device_uuids", lambda indices: None)
    monkeypatch.setattr(runner_preflight, "cuda_available", lambda: True)
    monkeypatch.setattr(runner_module, "init_gpu_context", lambda: None)

    def install(*gpus: FakeGpu) -> FakeNvml:
        fake = FakeNvml(list(gpus), RealClock())  # energy grows with real time
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install


def run_measured(model_dir: Path, run_dir: Path, *overrides: str) -> dict[str, Any]:
    """One measured run (``MEASURED``, then ``overrides``) by a fresh Runner: result.json."""
    exp = compose_tiny(model_dir, *MEASURED, *overrides)
    return Runner().run(exp, run_dir).to_json()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def detached_server(port: int) -> Iterator[int]:
    """The fake server (``fake_openai_cli``) on 127.0.0.1:``port`` in a process that is not
    llem's descendant (started through a shell that exits at once: it is reparented away);
    yields its pid, stops it at the end."""
    shell = f"{sys.executable} -m tests.server.fake_openai_cli {port} >/dev/null 2>&1 & echo $!"
    started = subprocess.run(
        ["sh", "-c", shell], cwd=REPO, env=llem_env(), capture_output=True, text=True, check=True
    )
    pid = int(started.stdout.strip())
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield pid
    finally:
        os.kill(pid, signal.SIGTERM)

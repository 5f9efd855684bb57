"""A llem command (``llem.app.entrypoint.main``) on the tiny model whose engine starts a process
of its own at load, as vLLM's engine core does, and stops it at unload; its warm-up waits forever.
Run as a script by the SIGTERM test: it writes the engine process's pid to PIDFILE once the run
waits, then waits for a signal.

usage: python -m tests.runner.sigterm_run MODEL_DIR RUN_DIR PIDFILE   (the checkout on PYTHONPATH)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from llem.app.entrypoint import main
from llem.backends.pytorch.backend import PyTorchBackend


def run() -> int:
    model_dir, run_dir, pidfile = sys.argv[1:4]
    load, unload = PyTorchBackend.load, PyTorchBackend.unload
    engines: list[subprocess.Popen[bytes]] = []

    def load_with_engine_process(self: Any, device: str) -> Any:
        loaded = load(self, device)
        engines.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]))
        return loaded

    def unload_with_engine_process(self: Any, loaded: Any) -> None:
        while engines:
            engine = engines.pop()
            engine.terminate()
            engine.wait(timeout=30)
        unload(self, loaded)

    def warm_up(self: Any, loaded: Any, *args: Any) -> None:
        Path(pidfile).write_text(str(engines[-1].pid))
        time.sleep(3600)

    PyTorchBackend.load = load_with_engine_process  # type: ignore[method-assign]
    PyTorchBackend.unload = unload_with_engine_process  # type: ignore[method-assign]
    PyTorchBackend.warm_up = warm_up  # type: ignore[method-assign]
    overrides = [
        "model=hf",
        f"model.name_or_path={model_dir}",
        "device=cpu",
        "measurement.energy=none",
        f"hydra.run.dir={run_dir}",
    ]
    return main(overrides)


if __name__ == "__main__":
    sys.exit(run())

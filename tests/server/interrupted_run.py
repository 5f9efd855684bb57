"""A ``+backend=server server.launch=vllm`` run whose launch command is the fake launch server
(``fake_launch_server.py``) and whose warm-up waits forever, run as a script by the interrupt
tests: it writes the launched group's id to MARKER once the server is up, then waits for a
signal.

usage: interrupted_run.py MODEL_DIR RUN_DIR MARKER PIDFILE
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

from llem.backends.server import backend, preflight
from llem.backends.server.launch import LaunchSpec
from llem.config.server import Launch
from llem.testing.cli import run_tiny

FAKE = Path(__file__).with_name("fake_launch_server.py")


def main() -> None:
    # Ctrl-C as a terminal delivers it: a process started from a background job of a shell
    # without job control (a CI script run with `&`) inherits SIGINT ignored, and then no Ctrl-C
    # reaches the run at all
    signal.signal(signal.SIGINT, signal.default_int_handler)
    model_dir, run_dir, marker, pidfile = sys.argv[1:5]

    def spec(sections: Any, port: int, *_: Any) -> LaunchSpec:
        return LaunchSpec((sys.executable, str(FAKE), str(port), "0", "ok", pidfile))

    def warm_up(self: Any, loaded: Any, batches: Any, n_batches: int) -> None:
        Path(marker).write_text(str(loaded.launched.pid))
        time.sleep(3600)

    backend.launch_spec = spec  # type: ignore[assignment]
    preflight.LAUNCH_PACKAGES[Launch.vllm] = ("llem", "")  # the fake needs no vllm
    backend.ServerBackend.warm_up = warm_up  # type: ignore[method-assign]
    overrides = ("+backend=server", "server.launch=vllm", "server.model=m")
    run_tiny(Path(model_dir), Path(run_dir), *overrides)


if __name__ == "__main__":
    main()

"""A ``+backend=server server.launch=vllm`` run whose launch command is the fake launch server
(``fake_launch_server.py``), run as a script by the interrupt tests. It stops and waits for a
signal at STAGE: ``starting`` (the server never becomes ready; the test waits for PIDFILE),
``ready`` (the server answers, and llem is checking which models it serves) or ``warm-up``
(the run's warm-up waits forever). At ``ready`` and ``warm-up`` it writes the launched group's
id to MARKER.

usage: interrupted_run.py MODEL_DIR RUN_DIR MARKER PIDFILE STAGE
"""

from __future__ import annotations

import os
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
    model_dir, run_dir, marker, pidfile, stage = sys.argv[1:6]

    def wait_here(*_: Any) -> Any:
        group = os.getpgid(int(Path(pidfile).read_text()))  # the fake's child: in its group
        Path(marker).write_text(str(group))
        time.sleep(3600)

    def spec(sections: Any, port: int, *_: Any) -> LaunchSpec:
        mode = "never" if stage == "starting" else "ok"
        return LaunchSpec((sys.executable, str(FAKE), str(port), "0", mode, pidfile))

    backend.launch_spec = spec  # type: ignore[assignment]
    preflight.LAUNCH_PACKAGES[Launch.vllm] = ("llem", "")  # the fake needs no vllm
    if stage == "ready":
        backend.served_models = wait_here  # type: ignore[assignment]
    elif stage == "warm-up":
        backend.ServerBackend.warm_up = wait_here  # type: ignore[method-assign,assignment]
    overrides = ("+backend=server", "server.launch=vllm", "server.model=m")
    run_tiny(Path(model_dir), Path(run_dir), *overrides)


if __name__ == "__main__":
    main()

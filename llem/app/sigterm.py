"""SIGTERM unwinds a llem command as Ctrl-C does: what SLURM's ``scancel`` and time limit, a
container's stop and ``timeout`` send.

The default action of SIGTERM ends the process at once: no ``finally`` runs, so an engine's own
processes (vLLM's engine core and workers), a launched server, GPU settings and a half-written
result would be left behind. While a command runs, ``sigterm_unwinds`` makes SIGTERM raise
``SystemExit(143)`` instead (the exit status a shell gives a process ended by it), so each
layer's ``finally`` stops what it started and the interrupted run's result.json says
``terminated by SIGTERM (exit 143)``. The handler in place before is put back afterwards. Only
the main thread can set a handler; elsewhere the block runs as it is.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from llem.errors import EXIT_SIGTERM


def _raise(signum: int, frame: Any) -> None:
    raise SystemExit(EXIT_SIGTERM)


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)

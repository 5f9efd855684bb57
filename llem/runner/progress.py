"""Progress of the current run's batches: a live line on a terminal, a log line per pass
otherwise (and always when a sweep's live display owns the terminal)."""

from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("llem.run")


class BatchProgress:
    def __init__(self, n_batches: int, live_display: bool = False) -> None:
        self.n = n_batches
        self.tty = sys.stderr.isatty() and not live_display
        self.t0 = time.perf_counter()

    def batch(self, pass_no: int, k: int) -> None:
        elapsed = time.perf_counter() - self.t0
        if self.tty:
            sys.stderr.write(f"\r  pass {pass_no} · batch {k}/{self.n} · {elapsed:.1f} s   ")
            sys.stderr.flush()
        elif k == self.n:
            log.info("pass %d done: %d batches in %.1f s", pass_no, self.n, elapsed)

    def done(self) -> None:
        if self.tty:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()

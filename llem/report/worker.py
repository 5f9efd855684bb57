"""The end-of-sweep report, built by a process started when the sweep starts.

The report needs pandas, pyarrow and matplotlib, whose imports cost about a second of CPU. A worker
started with the sweep does them while the sweep plans its points, says ``ready``, then waits for
its job, using no CPU, and builds the report from the files on disk when the sweep ends. The sweep
starts its first point only once the worker is ready (``ReportWorker.wait_ready``, called by
``llem.report.callback`` before every job), so the worker never runs beside a point. The table,
the files and the log line are the same as when the report is built in the sweep's own process
(which is what happens whenever the worker cannot be used).

    python -m llem.report.worker     # "ready" on stdout; one JSON job on stdin -> one JSON answer

The job is ``{"sweep_dir": ..., "plots": bool}``; the answer ``{"text", "out_dir", "files"}``, or
``{"error_type", "error"}`` when the report could not be built. End of input without a job (the
sweep was interrupted, or its process died) ends the worker without building anything.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

READY = "ready"  # the worker's first line: its imports are done and it waits for its job

# What the report imports; done before the job arrives.
_WARM = (
    "pandas",
    "pyarrow.parquet",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "llem.report.build",
)


@dataclass(frozen=True)
class WorkerReply:
    """What the worker built: the printed text, where and how many files; or why it could not."""

    text: str = ""
    out_dir: str = ""
    files: int = 0
    error_type: str | None = None
    error: str | None = None


class ReportWorker:
    """The sweep's side: start the worker, later hand it the sweep directory and read its answer."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc
        self._ready = False

    @classmethod
    def start(cls) -> ReportWorker | None:
        """A worker warming up, or None when none could be started (the report is then built
        in this process)."""
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "llem.report.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,  # Ctrl-C is the sweep's; the worker ends at end of input
            )
        except OSError as exc:
            log.debug("no report worker: %s", exc)
            return None
        return cls(proc)

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait until the worker has done its imports and waits for its job, after which it uses
        no CPU until ``build``; False when it ended or is not ready within ``timeout_s``."""
        if self._ready:
            return True
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        seen = b""
        deadline = time.monotonic() + timeout_s
        while not seen.endswith(b"\n"):
            left = deadline - time.monotonic()
            # the pipe is read below Python's buffer, which stays empty for communicate()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
            chunk = os.read(fd, 1)
            if not chunk:  # the worker ended
                return False
            seen += chunk
        self._ready = seen.decode().strip() == READY
        return self._ready

    def build(self, sweep_dir: Path, plots: bool) -> WorkerReply | None:
        """The worker's answer for ``sweep_dir``; None when the worker is gone or said nothing."""
        job = json.dumps({"sweep_dir": str(sweep_dir), "plots": plots})
        try:
            out, _ = self._proc.communicate(job + "\n")
        except (OSError, ValueError) as exc:
            log.debug("report worker failed: %s", exc)
            return None
        lines = out.strip().splitlines()
        if self._proc.returncode != 0 or not lines:
            return None
        return WorkerReply(**json.loads(lines[-1]))

    def close(self) -> None:
        """End a worker that was given no job (its input closes; it exits without building)."""
        if self._proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self._proc.communicate("", timeout=30)

    def kill(self) -> None:
        """End the worker now, whatever it is doing."""
        with contextlib.suppress(OSError):
            self._proc.kill()
        with contextlib.suppress(OSError, ValueError):
            self._proc.communicate(timeout=30)


def _answer(job: dict[str, Any]) -> WorkerReply:
    from llem.report.build import build_report

    try:
        report = build_report([Path(job["sweep_dir"])], plots=bool(job.get("plots", True)))
    except Exception as exc:
        return WorkerReply(error_type=type(exc).__name__, error=str(exc))
    return WorkerReply(text=report.text, out_dir=str(report.out_dir), files=len(report.files))


def main(stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> int:
    logging.basicConfig(format="[%(asctime)s][%(levelname)s] %(message)s", datefmt="%H:%M:%S")
    for name in _WARM:
        __import__(name)
    try:
        stdout.write(READY + "\n")
        stdout.flush()
    except BrokenPipeError:  # the sweep stopped before it started a point (a config error)
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())  # nothing to flush at exit
        return 0
    line = stdin.readline()  # blocks, using no CPU, until the sweep ends
    if not line.strip():
        return 0
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the answer alone
        answer = _answer(json.loads(line))
    stdout.write(json.dumps(answer.__dict__) + "\n")
    stdout.flush()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the sweep's to handle
    sys.exit(main())

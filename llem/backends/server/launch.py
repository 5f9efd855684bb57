"""Starting and stopping an OpenAI-compatible server for a measurement (``server.launch``).

``LaunchedServer`` starts a command in a process group of its own (``start_new_session``), its
stdout and stderr appended to ``server.log`` in a directory the caller gives, and polls the server
until ``GET /v1/models`` or ``GET /health`` answers 200 within ``ready_timeout_s``. A server that
exits before it is ready, or is not ready in time, is an ``ServerLaunchError`` carrying the log's
tail. Stopping sends SIGTERM to the whole group, waits ``grace_s`` and then SIGKILLs the group:
children that the server forked (vLLM's engine core, its workers) go with it. Used as a context
manager the server is stopped on every way out of the ``with`` block: a normal end, an
exception, a KeyboardInterrupt.

``LaunchRecord`` is what a result keeps: the full command line, the seconds from launch to ready,
the server's version where it reports one (``GET /version``: vLLM, SGLang; ``GET /info``: TGI),
else the installed version of the Python package the command runs (``LaunchSpec.package``:
llama-cpp-python's), else None with the reason.

The presets' commands are built in ``commands``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from llem.backends.server.server_log import cause_text, log_tail
from llem.errors import RunError

#: where readiness is asked, in order: OpenAI's model list, then the health check most servers have
READY_PATHS = ("/v1/models", "/health")
#: where a server's version is asked: vLLM and SGLang answer /version, TGI /info
VERSION_PATHS = ("/version", "/info")
LOG_NAME = "server.log"


class ServerLaunchError(RunError):
    """The server did not start: it exited, or it was not ready in time (its log's tail follows)."""


@dataclass(frozen=True)
class LaunchSpec:
    """A command to start a server, and the environment variables it needs on top of ours."""

    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    # the Python distribution the command runs, in this interpreter: its version is the server's
    # where the server reports none (llama-cpp-python's)
    package: str | None = None

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)


@dataclass(frozen=True)
class LaunchRecord:
    """What the result keeps of one launch (seconds on ``time.perf_counter``)."""

    command_line: str
    env: dict[str, str]  # the variables llem added (never the caller's whole environment)
    log_path: str
    pid: int
    launch_to_ready_s: float
    version: str | None
    version_reason: str | None  # why ``version`` is None


def http_get(url: str, timeout_s: float) -> tuple[int, bytes]:
    """(status, body) of a GET; status 0 when nothing answered (refused, reset, timed out)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (local URL)
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, ValueError):
        return 0, b""


def server_version(base_url: str, timeout_s: float = 2.0) -> tuple[str | None, str | None]:
    """(version, None) where the server reports one, else (None, why)."""
    for path in VERSION_PATHS:
        status, body = http_get(base_url + path, timeout_s)
        if status != 200:
            continue
        try:
            answer = json.loads(body)
        except ValueError:
            continue
        if isinstance(answer, dict) and isinstance(answer.get("version"), str):
            return answer["version"], None
    return None, f"the server reports no version at {' or '.join(VERSION_PATHS)}"


def package_version(package: str, why: str | None) -> tuple[str | None, str | None]:
    """The installed version of ``package`` (the launched command runs it in this interpreter),
    else (None, ``why``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package), None
    except PackageNotFoundError:
        return None, why


def group_alive(pgid: int) -> bool:
    """Whether any process of the group ``pgid`` is still there."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LaunchedServer:
    """One server process group, from ``start`` (ready) to ``stop`` (the whole group gone)."""

    def __init__(
        self,
        spec: LaunchSpec,
        base_url: str,
        log_dir: Path,
        ready_timeout_s: float = 600.0,
        grace_s: float = 10.0,
        poll_s: float = 0.25,
    ) -> None:
        self.spec = spec
        self.base_url = base_url.rstrip("/")
        self.log_path = Path(log_dir) / LOG_NAME
        self.ready_timeout_s = ready_timeout_s
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.process: subprocess.Popen[bytes] | None = None
        self.record: LaunchRecord | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self) -> LaunchRecord:
        """Start the command and wait until it is ready; stop it again if it is not."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        launched_s = time.perf_counter()
        try:
            # a SIGTERM or Ctrl-C inside Popen would lose the child it has just started: they
            # wait until the process is known, so that the stop below reaches it
            with self.log_path.open("ab") as log, signals_deferred():
                try:
                    self.process = subprocess.Popen(
                        self.spec.command,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        env={**os.environ, **self.spec.env},
                        start_new_session=True,
                    )
                except OSError as e:
                    raise ServerLaunchError(
                        f"server command could not start ({e}): {self.spec.command_line}"
                    ) from e
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        ready_s = time.perf_counter() - launched_s
        version, why = server_version(self.base_url)
        if version is None and self.spec.package is not None:
            version, why = package_version(self.spec.package, why)
        self.record = LaunchRecord(
            command_line=self.spec.command_line,
            env=dict(self.spec.env),
            log_path=str(self.log_path),
            pid=self.process.pid,
            launch_to_ready_s=ready_s,
            version=version,
            version_reason=why,
        )
        return self.record

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise ServerLaunchError(
                    f"server exited with code {code} before it was ready"
                    f"{cause_text(self.log_path)} ({self.spec.command_line}); "
                    f"log {self.log_path} ends:\n" + log_tail(self.log_path)
                )
            for path in READY_PATHS:
                if http_get(self.base_url + path, max(self.poll_s, 1.0))[0] == 200:
                    return
            if time.monotonic() >= deadline:
                raise ServerLaunchError(
                    f"server not ready within ready_timeout_s={self.ready_timeout_s:g} "
                    f"({self.base_url}{' or '.join(READY_PATHS)} never answered 200); "
                    f"log {self.log_path} ends:\n" + log_tail(self.log_path)
                )
            time.sleep(self.poll_s)

    def alive(self) -> bool:
        """Whether the server's leader is still running (a server that died mid-window: not)."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM to the whole group, SIGKILL after ``grace_s``; returns once the group is gone
        (idempotent). Interrupts during the wait do not leave the group running."""
        if self.process is None:
            return
        pgid = self.process.pid  # start_new_session: the leader's pid is the group's id
        try:
            _signal_group(pgid, signal.SIGTERM)
            if not self._wait_group(pgid, self.grace_s):
                _signal_group(pgid, signal.SIGKILL)
                self._wait_group(pgid, 10.0)
        except BaseException:
            _signal_group(pgid, signal.SIGKILL)
            raise
        finally:
            self.process.poll()

    def _wait_group(self, pgid: int, timeout_s: float) -> bool:
        """Reap the leader and wait for the rest of its group; True when all are gone."""
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.process.poll()
            if self.process.returncode is not None and not group_alive(pgid):
                return True
            time.sleep(0.05)
        self.process.poll()
        return self.process.returncode is not None and not group_alive(pgid)

    def __enter__(self) -> LaunchedServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


DEFERRED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGTERM and SIGINT that arrive inside the block are delivered when it ends, to the
    handlers in place before it (on the main thread; elsewhere none can be set, and the block
    runs as it is). Handlers, not the signal mask: a mask would pass to the child started inside."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def defer(signum: int, frame: object) -> None:
        arrived.append(signum)

    # a handler set outside Python (getsignal's None) could not be put back: left as it is
    kept = [sig for sig in DEFERRED_SIGNALS if signal.getsignal(sig) is not None]
    previous = {sig: signal.signal(sig, defer) for sig in kept}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def launch(
    spec: LaunchSpec | Sequence[str],
    base_url: str,
    log_dir: Path,
    ready_timeout_s: float = 600.0,
    grace_s: float = 10.0,
) -> LaunchedServer:
    """A ``LaunchedServer`` for a preset's spec or a command of one's own (use it in ``with``)."""
    if not isinstance(spec, LaunchSpec):
        spec = LaunchSpec(tuple(spec))
    return LaunchedServer(spec, base_url, log_dir, ready_timeout_s, grace_s)

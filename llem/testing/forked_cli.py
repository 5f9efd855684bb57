"""Run ``python -m llem ...`` in a forked child of an interpreter that has imported llem already.

A tiny run of ``python -m llem`` spends most of its CPU time importing torch and transformers,
and the tests start about a hundred of them. ``run_llem`` here (the signature and the answer of
``llem.testing.cli.run_llem``) forks each run from a server process that imported those modules
once, and makes the child what ``python -m llem`` started by ``cli.run_llem`` would be:

- the server is itself a fresh interpreter started with the call's environment, so what the
  preloaded modules read from the environment at import (huggingface_hub's ``HF_HUB_OFFLINE``,
  torch's and transformers' variables) they read as the run would. Only the variables in
  ``PER_RUN``, read when a run needs them, may differ between the calls one server takes; a call
  whose environment differs in another, or made with other CPUs allowed, gets a server of its
  own (its first call runs ``python -m llem`` itself);
- the child takes the call's environment (``os.environ`` replaced, so C code sees it too), working
  directory (first on ``sys.path``, as ``-m`` puts it), CPU affinity and umask; its fds 1 and 2
  are files, so the output of C code and of the processes it starts is captured too; stdin is
  ``/dev/null``. It runs ``llem/__main__.py`` as ``-m`` does, then what the interpreter does at
  exit (it waits for threads, runs the atexit handlers), and exits with the command's code;
- the server only imports: it never runs llem nor a torch operation, and it refuses to fork with
  more than one thread (OpenBLAS's threads, started at import, stop at a fork). A child
  therefore starts with none of a run's state (Hydra's globals, logging's handlers, signal
  handlers, atexit handlers, OpenMP's threads).

The server waits for its children, and the caller's process waits for the server at its exit
(``stop_servers``), so their CPU time counts as the caller's children's, as a subprocess's does.
A test of the command line as an interpreter starts it (its start-up time, what it imports, the
console script, signals sent to it) runs ``llem.testing.cli.run_llem`` instead.
``LLEM_FORKED_CLI=0`` sends every call to ``cli.run_llem``.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import locale
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from llem.testing import cli

#: the modules a tiny CPU run of the PyTorch engine imports at the top of its import tree (``python
#: -X importtime -m llem ...``), in that order: about 4 s of its 5.7 CPU-s
PRELOAD = (
    "llem.app.entrypoint",
    "llem.sweep.search_sweeper",
    "llem.backends.pytorch.backend",
    "torch",
    "transformers",
    "transformers.models.auto.auto_factory",
    "transformers.tokenization_utils_base",
    "transformers.utils.type_validators",
    "transformers.masking_utils",
    "transformers.modeling_layers",
    "transformers.models.llama.modeling_llama",
)

#: variables that may differ between the runs of one server: read when a run needs them, never
#: when a preloaded module is imported (pytest sets the second for each test)
PER_RUN = frozenset({"LLEM_CACHE_DIR", "PYTEST_CURRENT_TEST"})

#: ``LLEM_FORKED_CLI=0`` runs every call as ``python -m llem`` (``cli.run_llem``)
SWITCH = "LLEM_FORKED_CLI"

#: the most servers that run at once (each holds torch and transformers: about 0.4 GB)
MAX_SERVERS = 3

#: the exit status of a child that failed before it could run llem
CHILD_SETUP_FAILED = 70


def run_llem(
    *args: str,
    multirun: bool = False,
    cwd: Path | str = cli.REPO,
    timeout: float | None = 600,
    offline: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``cli.run_llem``'s run, forked from a server: returncode, stdout and stderr as text; at
    ``timeout`` s the child's process group is killed and ``subprocess.TimeoutExpired`` raised."""
    return run_command(
        [*(["--multirun"] if multirun else []), *args],
        env=cli.llem_env(offline=offline),
        cwd=cwd,
        timeout=timeout,
    )


def run_command(
    argv: list[str], *, env: dict[str, str], cwd: Path | str, timeout: float | None
) -> subprocess.CompletedProcess[str]:
    """``python -m llem ARGV`` with ``env`` in ``cwd``, forked where a server for ``env`` runs."""
    command = [sys.executable, "-m", "llem", *argv]
    server = _servers.get(env) if os.environ.get(SWITCH, "1") != "0" else None
    if server is None:
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    return server.run(command, argv, env=env, cwd=Path(cwd), timeout=timeout)


def stop_servers() -> None:
    """Stop every server and wait for it (and so for the CPU time of the runs it forked)."""
    _servers.stop()


_Key = tuple[frozenset[tuple[str, str]], frozenset[int]]


class _Servers:
    """The servers of this process, one per environment (``PER_RUN`` left out) and CPU affinity
    (OpenMP counts the CPUs it may use when torch loads it), each started at the second call that
    needs it (an environment made for one test, with its own folder on ``PATH``, would pay for a
    server and use it once); at most ``MAX_SERVERS`` run, the one unused for longest stopping
    first."""

    def __init__(self, *, fork_first_call: bool = False) -> None:
        self.fork_first_call = fork_first_call
        self.seen: set[_Key] = set()
        self.running: dict[_Key, _Server] = {}  # in the order of their last use

    def get(self, env: dict[str, str]) -> _Server | None:
        variables = frozenset((k, v) for k, v in env.items() if k not in PER_RUN)
        key = (variables, frozenset(os.sched_getaffinity(0)))
        if key in self.running:
            self.running[key] = self.running.pop(key)
            return self.running[key]
        if key not in self.seen and not self.fork_first_call:
            self.seen.add(key)
            return None
        while len(self.running) >= MAX_SERVERS:
            self.running.pop(next(iter(self.running))).stop()
        self.running[key] = _Server.start(env)
        return self.running[key]

    def stop(self) -> None:
        while self.running:
            self.running.popitem()[1].stop()


_servers = _Servers()
atexit.register(stop_servers)


@dataclass
class _Server:
    process: subprocess.Popen[bytes]
    requests: IO[bytes]
    answers: IO[bytes]
    home: Path  # its working directory, and its stderr's file

    @classmethod
    def start(cls, env: dict[str, str]) -> _Server:
        """A fresh interpreter with ``env`` that imports ``PRELOAD`` and waits for requests."""
        home = Path(tempfile.mkdtemp(prefix="llem-fork-server-"))  # nothing there to import
        with open(home / "stderr", "wb") as stderr:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "from llem.testing.forked_cli import serve_forks; serve_forks()",
                ],
                cwd=home,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        assert process.stdin is not None and process.stdout is not None
        server = cls(process, process.stdin, process.stdout, home)
        ready = server.answer(None)
        if ready.get("threads") != 1:
            server.stop()
            raise RuntimeError(f"the llem fork server is not ready: {ready}")
        return server

    def run(
        self,
        command: list[str],
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        timeout: float | None,
    ) -> subprocess.CompletedProcess[str]:
        with tempfile.TemporaryDirectory(prefix="llem-forked-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            request = {
                "argv": argv,
                "env": env,
                "cwd": str(cwd.resolve()),
                "stdout": str(out),
                "stderr": str(err),
                "cpus": sorted(os.sched_getaffinity(0)),
                "umask": _umask(),
            }
            self.requests.write(json.dumps(request).encode() + b"\n")
            self.requests.flush()
            started = self.answer(None)
            if "pid" not in started:
                raise RuntimeError(f"the llem fork server did not fork: {started}")
            pid = started["pid"]
            try:
                code = self.answer(timeout)["returncode"]
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                self.answer(None)
                raise subprocess.TimeoutExpired(
                    command, timeout or 0, output=_text(out), stderr=_text(err)
                ) from None
            return subprocess.CompletedProcess(command, code, _text(out), _text(err))

    def answer(self, timeout: float | None) -> dict[str, Any]:
        """The server's next answer line; ``subprocess.TimeoutExpired`` when none comes in time."""
        ready, _, _ = select.select([self.answers], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired("llem fork server", timeout or 0)
        line = self.answers.readline()
        if not line:
            stderr = (self.home / "stderr").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the llem fork server exited ({self.process.wait()}):\n{stderr}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        self.requests.close()  # the server exits at the end of its requests
        self.process.wait()
        self.answers.close()
        shutil.rmtree(self.home, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _text(path: Path) -> str:
    """A captured stream as ``subprocess.run(text=True)`` decodes it."""
    data = path.read_bytes() if path.exists() else b""
    text = data.decode(locale.getpreferredencoding(False))
    return text.replace("\r\n", "\n").replace("\r", "\n")


# --- the server's side ---------------------------------------------------------------------------


def serve_forks() -> None:
    """The server's loop: import ``PRELOAD``, then fork a child per request line on stdin, answering
    on stdout a line with the child's pid and one with its exit code; return at stdin's end."""
    import importlib

    # a child runs the atexit handlers of llem's process, not this one
    atexit.unregister(stop_servers)
    for name in PRELOAD:
        importlib.import_module(name)
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # the children's fds 0 and 1 are never the protocol's pipes
    os.close(null)

    def say(**answer: Any) -> None:
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()

    # numpy's and scipy's OpenBLAS start their thread pools at import and stop them at a fork
    # (pthread_atfork): a first fork leaves the server with its one thread, or tells it cannot
    first = os.fork()
    if first == 0:
        os._exit(0)
    os.waitpid(first, 0)
    say(threads=_threads())
    for line in requests:
        if _threads() != 1:  # a fork of a process with threads may inherit their locks held
            say(error=f"{_threads()} threads")
            continue
        pid = os.fork()
        if pid == 0:
            requests.close()
            answers.close()
            _child(json.loads(line))
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the child does: the caller may kill it before it has
        say(pid=pid)
        say(returncode=os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _child(request: dict[str, Any]) -> None:
    """Become ``python -m llem ARGV`` as the request describes it; never returns."""
    try:
        os.setpgid(0, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.sched_setaffinity(0, request["cpus"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = request["cwd"]  # where -m puts the directory it started in
        sys.argv = ["-m", *request["argv"]]
    except BaseException:  # pragma: no cover - reported by the exit status
        os._exit(CHILD_SETUP_FAILED)
    os._exit(_run_as_main())


def _run_as_main() -> int:
    """Run ``llem/__main__.py`` as ``python -m llem`` does, then what the interpreter does at exit;
    return the exit code."""
    import runpy
    import threading

    try:
        runpy._run_module_as_main("llem", alter_argv=True)  # type: ignore[attr-defined]
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _exit_code(code: object) -> int:
    """The exit status of ``SystemExit(code)``, as the interpreter makes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1

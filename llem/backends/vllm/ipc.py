"""vLLM's IPC sockets in a directory of llem's own, removed when llem's process exits.

Each vLLM engine opens ZeroMQ sockets as files under ``VLLM_RPC_BASE_PATH`` (the temporary
directory by default) and leaves them there after it shuts down: about ten files per engine start,
so a sweep litters ``/tmp`` with hundreds. Before its first engine starts, llem points
``VLLM_RPC_BASE_PATH`` at one fresh directory for the whole process (vLLM may cache the variable
after an engine starts, so it never changes afterwards) and removes it at exit. A value the user
set is left as it is, and so is vLLM's default where the temporary directory's path is so long that
a socket's path in llem's directory would pass the 107 characters a Unix socket's path may have.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

VARIABLE = "VLLM_RPC_BASE_PATH"
PREFIX = "llem-"
SOCKET_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
SOCKET_NAME_LEN = 36  # vLLM names each socket by a uuid4

_owned: tuple[int, str] | None = None  # (the process that made it, the directory)


def use_own_ipc_directory() -> str:
    """The directory vLLM's sockets go to: llem's own, made on the first call of this process,
    unless the user set ``VLLM_RPC_BASE_PATH`` or the temporary directory's path is too long."""
    global _owned
    if _owned is not None and _owned[0] == os.getpid():
        return _owned[1]
    if os.environ.get(VARIABLE):
        return os.environ[VARIABLE]
    base = tempfile.gettempdir()
    # base / PREFIX + mkdtemp's 8 characters / a uuid
    if len(base) + 1 + len(PREFIX) + 8 + 1 + SOCKET_NAME_LEN > SOCKET_PATH_MAX:
        return base  # vLLM's own default: its sockets stay behind, but they fit
    path = tempfile.mkdtemp(prefix=PREFIX, dir=base)
    _owned = (os.getpid(), path)
    os.environ[VARIABLE] = path
    atexit.register(_remove, os.getpid(), path)
    return path


def _remove(pid: int, path: str) -> None:
    """Remove the directory in the process that made it (never in a forked child)."""
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)

"""Which processes are a running server's (``server.url``): the roots of its process trees.

llem did not start such a server, so its processes are not llem's descendants, and the
other-processes check would count them as foreign work on the measured GPUs. Its roots are, in
this order:

- ``server.pids``, as the user names them (a container's processes, seen from the host, or a
  server whose listening socket llem may not read);
- else, where the URL is on this host, the process(es) holding the socket that listens on the
  URL's port: ``/proc/net/tcp`` and ``tcp6`` give the listening socket's inode, and the
  ``/proc/<pid>/fd`` links that point at it its holders (a process of another user, or of root,
  keeps its links unreadable: then the roots are unknown, with that reason).

Each root stands with its descendants (vLLM's API server starts its engine core and workers as
children). A process on a measured GPU outside those trees is another's work. Where no root is
known, the processes on the measured GPUs are taken as the server's, and the run says so
(``llem.backends.server.gpus``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from llem.measure.family import is_own
from llem.vocabulary.model import WorkloadProcesses

PROC = Path("/proc")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column


@dataclass(frozen=True)
class ServerProcesses:
    """The server's root processes (empty: not known, ``reason`` says why) and how they were
    found (``found_by``, one phrase for the result)."""

    roots: tuple[int, ...]
    found_by: str | None
    reason: str | None = None

    def owns(self, pid: int, proc_root: Path = PROC) -> bool:
        """Whether ``pid`` is a root or a descendant of one (every pid where none is known)."""
        if not self.roots:
            return True
        return any(is_own(pid, root, proc_root) for root in self.roots)

    def workload(self, url: str) -> WorkloadProcesses:
        """What the measurement counts as the run's own beside llem's processes."""
        if self.roots:
            said = (
                f"counted as the server at {url}'s: {self.found_by}, and its descendants; a "
                "process of the server outside them can be named in server.pids"
            )
        else:
            said = (
                f"the processes of the server at {url} are not known ({self.reason}): every "
                "process on the measured GPUs is taken as the server's"
            )
        return WorkloadProcesses(self.owns, said)


def url_port(url: str) -> int:
    """The URL's port (its scheme's default where it names none)."""
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def _listening_inodes(port: int, proc_root: Path) -> set[str] | None:
    """Inodes of the sockets listening on ``port`` (None: no table could be read)."""
    inodes: set[str] = set()
    read = False
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc_root / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        read = True
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != LISTEN:
                continue
            if int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(cols[9])
    return inodes if read else None


def _holders(inodes: set[str], proc_root: Path) -> tuple[list[int], int]:
    """(pids whose descriptors hold one of ``inodes``, how many processes' fds were unreadable)."""
    wanted = {f"socket:[{i}]" for i in inodes}
    found: list[int] = []
    unreadable = 0
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = os.listdir(entry / "fd")
        except OSError:
            unreadable += 1
            continue
        for fd in fds:
            try:
                target = os.readlink(entry / "fd" / fd)
            except OSError:
                continue
            if target in wanted:
                found.append(int(entry.name))
                break
    return sorted(found), unreadable


def process_name(pid: int, proc_root: Path = PROC) -> str | None:
    """``/proc/<pid>/comm`` (None: not readable)."""
    try:
        return (proc_root / str(pid) / "comm").read_text().strip() or None
    except OSError:
        return None


def _named(pids: Sequence[int], proc_root: Path) -> str:
    return ", ".join(f"pid {p} ({process_name(p, proc_root) or 'name unreadable'})" for p in pids)


def listening(port: int, proc_root: Path = PROC) -> ServerProcesses:
    """The processes holding the socket that listens on ``port`` on this host."""
    inodes = _listening_inodes(port, proc_root)
    if inodes is None:
        return ServerProcesses((), None, f"{proc_root}/net/tcp cannot be read here")
    if not inodes:
        return ServerProcesses(
            (),
            None,
            f"no socket of this host's network namespace listens on port {port} (a container's "
            "published port, or a forwarded one)",
        )
    pids, unreadable = _holders(inodes, proc_root)
    if not pids:
        return ServerProcesses(
            (),
            None,
            f"the socket listening on port {port} belongs to no process whose descriptors llem "
            f"may read ({unreadable} processes' are not readable: another user's or root's)",
        )
    roots = tuple(p for p in pids if not any(p != q and is_own(p, q, proc_root) for q in pids))
    return ServerProcesses(roots, f"{_named(roots, proc_root)}, listening on port {port}")


def server_processes(
    url: str, pids: Sequence[int] | None, local: bool, proc_root: Path = PROC
) -> ServerProcesses:
    """The roots of the server at ``url`` (see the module); ``local``: the URL is this host's."""
    if pids:
        return ServerProcesses(tuple(pids), f"{_named(pids, proc_root)}, named by server.pids")
    if not local:
        return ServerProcesses((), None, "the URL is not on this host")
    return listening(url_port(url), proc_root)

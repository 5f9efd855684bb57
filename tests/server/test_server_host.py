"""Whether a running server is on this host, which processes are its, and when its energy is
refused: the resolver, the bind test and /proc planted (a real socket and address too)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from llem.backends.server import processes, running
from llem.backends.server.host import HostCheck, bindable, url_host
from llem.config.measurement import EnergySource, MeasurementConfig
from llem.config.server import ServerConfig

OWN = {"10.1.2.3"}  # this machine's planted address


def planted(names: dict[str, list[str]]):
    def resolver(host: str) -> list[str]:
        if host not in names:
            raise socket.gaierror(-2, "Name or service not known")
        return names[host]

    return resolver


def check(url: str, **names: list[str]) -> HostCheck:
    return url_host(url, planted(names), lambda a: a in OWN)


def test_loopback_and_this_machines_own_addresses_are_this_host() -> None:
    assert check("http://127.0.0.1:8000", **{"127.0.0.1": ["127.0.0.1"]}).local
    assert check("http://[::1]:8000", **{"::1": ["::1"]}).local
    assert check("http://localhost:8000", localhost=["127.0.0.1", "::1"]).local
    assert check("http://gpu-box:8000", **{"gpu-box": ["10.1.2.3"]}).local


def test_another_address_or_a_name_that_does_not_resolve_is_not() -> None:
    far = check("http://gpu-box:8000", **{"gpu-box": ["10.9.9.9"]})
    assert not far.local and "10.9.9.9 is none of this machine's addresses" in far.why
    mixed = check("http://gpu-box:8000", **{"gpu-box": ["10.1.2.3", "10.9.9.9"]})
    assert not mixed.local  # every address must be this machine's
    unknown = check("http://nowhere.invalid:8000")
    assert not unknown.local and "does not resolve here" in unknown.why


def test_the_real_resolver_and_bind_test() -> None:
    assert url_host("http://127.0.0.1:8000").local
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this machine
    far = url_host("http://192.0.2.1:8000")
    assert not far.local and "192.0.2.1 is none of this machine's addresses" in far.why
    assert bindable("127.0.0.1") and not bindable("192.0.2.1")


# ---------------------------------------------------------------- the server's processes
def _proc(root: Path, pid: int, ppid: int, fds: dict[str, str] | None, comm: str = "srv") -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560\n")
    (d / "comm").write_text(comm + "\n")
    if fds is not None:
        (d / "fd").mkdir()
        for fd, target in fds.items():
            os.symlink(target, d / "fd" / fd)


def _tcp(root: Path, rows: list[tuple[int, str, str]]) -> None:
    """/proc/net/tcp with (port, state, inode) rows."""
    (root / "net").mkdir(parents=True, exist_ok=True)
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid"
    head += "  timeout inode\n"
    tail = "00000000:00000000 00:00000000 00000000  1000        0"
    lines = [
        f"   {k}: 0100007F:{port:04X} 00000000:0000 {st} {tail} {inode} 1"
        for k, (port, st, inode) in enumerate(rows)
    ]
    (root / "net" / "tcp").write_text(head + "\n".join(lines) + "\n")


def test_the_process_listening_on_the_urls_port_is_the_servers_root(tmp_path: Path) -> None:
    _tcp(tmp_path, [(8000, "0A", "555"), (8000, "01", "556"), (9000, "0A", "557")])
    _proc(tmp_path, 100, 1, {"3": "socket:[555]", "4": "/dev/null"}, "vllm")
    _proc(tmp_path, 101, 100, {"7": "socket:[555]"}, "VLLM::EngineCore")  # inherited the socket
    _proc(tmp_path, 102, 101, {}, "worker")
    _proc(tmp_path, 200, 1, {"3": "socket:[556]", "4": "socket:[557]"}, "other")
    found = processes.server_processes("http://127.0.0.1:8000", None, True, tmp_path)
    assert found.roots == (100,)  # 101 holds it too, but is 100's descendant
    assert found.found_by == "pid 100 (vllm), listening on port 8000"
    owns = {pid: found.owns(pid, tmp_path) for pid in (100, 101, 102, 200, 999)}
    assert owns == {100: True, 101: True, 102: True, 200: False, 999: False}


def test_no_listener_or_unreadable_descriptors_leave_the_roots_unknown(tmp_path: Path) -> None:
    _tcp(tmp_path, [(8000, "0A", "555")])
    _proc(tmp_path, 100, 1, None)  # another user's: no readable fd directory
    found = processes.server_processes("http://127.0.0.1:8000", None, True, tmp_path)
    assert found.roots == () and "1 processes' are not readable" in str(found.reason)
    assert found.owns(12345, tmp_path)  # no root known: every process is taken as the server's
    none = processes.server_processes("http://127.0.0.1:9000", None, True, tmp_path)
    assert none.roots == () and "listens on port 9000" in str(none.reason)
    far = processes.server_processes("http://10.9.9.9:8000", None, False, tmp_path)
    assert far.roots == () and far.reason == "the URL is not on this host"


def test_server_pids_name_the_roots(tmp_path: Path) -> None:
    _proc(tmp_path, 300, 1, {}, "trtllm-serve")
    found = processes.server_processes("https://gpu-box", [300], True, tmp_path)
    assert (
        found.roots == (300,) and found.found_by == "pid 300 (trtllm-serve), named by server.pids"
    )
    assert processes.url_port("https://gpu-box") == 443
    assert processes.url_port("http://gpu-box") == 80


def test_a_real_listening_socket_is_found_in_proc() -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp here")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        found = processes.listening(port)
    assert found.roots == (os.getpid(),)
    assert found.found_by is not None and found.found_by.endswith(f"listening on port {port}")


# ---------------------------------------------------------------- when energy is refused
LOCAL = HostCheck(True, "loopback")
FAR = HostCheck(False, "10.9.9.9 is none of this machine's addresses")


def _refusal(host: HostCheck, energy: str = "auto", **server: object) -> str | None:
    measurement = MeasurementConfig(energy=EnergySource(energy))
    for key in ("gpu_indices",):
        if key in server:
            setattr(measurement, key, server.pop(key))
    config = ServerConfig(url="http://h:8000", **server)  # type: ignore[arg-type]
    return running.energy_refusal(config, measurement, host)


def test_a_running_servers_energy_is_refused_elsewhere_or_on_unnamed_gpus() -> None:
    assert _refusal(LOCAL, gpus=[0]) is None
    assert _refusal(LOCAL, gpu_indices=[1]) is None
    unnamed = _refusal(LOCAL)
    assert unnamed is not None and "set server.gpus" in unnamed
    far = _refusal(FAR, gpus=[0])
    assert far is not None and far.startswith("server.url=http://h:8000 is not on this host (10.9")
    assert "run llem on the server's host" in far
    # a replayed trace or no energy reads no GPU of this host: nothing to refuse
    assert _refusal(FAR, "replay", gpus=[0]) is None and _refusal(FAR, "none") is None
    launched = running.energy_refusal(ServerConfig(launch=None), MeasurementConfig(), FAR)
    assert launched is None

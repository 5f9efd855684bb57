"""Whether a running server's URL is on this host, so that this host's GPUs can be its GPUs.

A URL is on this host when every address its host name resolves to (``getaddrinfo``: an
address literal as it is, a name through ``/etc/hosts`` and the resolver, as the requests'
connections will resolve it) is a loopback address or one of this machine's own addresses. An
address is this machine's when a socket can be bound to it: the kernel binds only to addresses of
its own interfaces (``EADDRNOTAVAIL`` otherwise), so the test needs no interface list and sends
nothing. A name that does not resolve is not known to be local. A server reached through a
forwarded port (an SSH tunnel, a container's published port) is local by its address whatever
runs behind it: the process check (``llem.backends.server.processes``) finds what listens there.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

Resolver = Callable[[str], list[str]]


@dataclass(frozen=True)
class HostCheck:
    """Whether the URL's host is this machine, and in words why (or why not)."""

    local: bool
    why: str


def resolve_host(host: str) -> list[str]:
    """The addresses ``host`` resolves to (raises OSError when it does not resolve)."""
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})


def bindable(address: str) -> bool:
    """Whether a socket can be bound to ``address`` here: it is one of this machine's."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
    except OSError:
        return False
    return True


def _own(address: str, is_bindable: Callable[[str], bool]) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return ip.is_loopback or ip.is_unspecified or is_bindable(address)


def url_host(
    url: str, resolver: Resolver = resolve_host, is_bindable: Callable[[str], bool] = bindable
) -> HostCheck:
    """Whether ``url``'s host is this machine (see the module)."""
    host = urlsplit(url).hostname
    if not host:
        return HostCheck(False, f"{url} names no host")
    try:
        addresses = resolver(host)
    except OSError as exc:
        return HostCheck(
            False, f"{host} does not resolve here ({exc}), so it is not known to be local"
        )
    if not addresses:
        return HostCheck(False, f"{host} resolves to no address here")
    foreign = [a for a in addresses if not _own(a, is_bindable)]
    shown = ", ".join(addresses)
    if foreign:
        return HostCheck(
            False,
            f"{host} resolves to {shown}, and {', '.join(foreign)} is none of this machine's "
            "addresses",
        )
    return HostCheck(True, f"{host} resolves to {shown}, this machine's own")

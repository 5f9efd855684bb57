"""A server llem did not start (``server.url``): what of its energy this machine can measure, and
whose processes on the measured GPUs are its.

Its energy is this host's GPUs' only where both hold (``energy_refusal``; otherwise the energy is
null with the reason and the remedy, never another GPU's):

- the URL is on this host (``llem.backends.server.host``): llem has no meter of another host's
  GPUs. ``measurement.energy=replay`` (a trace played against the run's clock, which the user
  gives) and ``none`` read no GPU of this host, so they are not refused;
- its GPUs are named, by ``server.gpus`` (or ``measurement.gpu_indices``): llem did not start the
  server and cannot know where it runs before it measures, so it does not guess GPU 0.

After the window (``window_processes``) the server's compute processes are found on the GPUs by
its roots (``llem.backends.server.processes``), for the run to record as the server's
(``server.processes``) and judge the GPUs holding them against the measured ones (check
``server_gpus``). Where no root is known, every process on the measured GPUs is taken as the
server's, and the run's check ``server_processes`` says so as a condition: if another program's
work ran there, it is in the figures (``llem.runner.engine_processes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llem.backends.server import gpus
from llem.backends.server.host import HostCheck, url_host
from llem.backends.server.processes import ServerProcesses, server_processes
from llem.config.measurement import MeasurementConfig
from llem.config.server import ServerConfig
from llem.devices.gpu import GpuOpener
from llem.measure.family import is_own
from llem.vocabulary.facts import EngineProcesses

#: the energy modes that read no GPU of this host
NOT_THIS_HOST = ("replay", "none")


def energy_refusal(
    config: ServerConfig, measurement: MeasurementConfig, host: HostCheck
) -> str | None:
    """Why this host's GPUs are not the running server's to measure (None: they may be)."""
    if config.url is None or measurement.energy.value in NOT_THIS_HOST:
        return None
    if not host.local:
        return (
            f"server.url={config.url} is not on this host ({host.why}): this machine's GPUs "
            "are not the server's, and llem reads no other host's meters; run llem on the "
            "server's host with server.url at its local address (http://127.0.0.1:PORT) and "
            "server.gpus naming its GPUs"
        )
    if config.gpus is None and measurement.gpu_indices is None:
        return (
            f"server.url={config.url} is a server llem did not start, and its GPUs are not "
            "named: set server.gpus to the GPU indices it runs on (as this process sees them "
            "under CUDA_VISIBLE_DEVICES); llem does not take GPU 0 for it"
        )
    return None


@dataclass(frozen=True)
class RunningServer:
    """Where a running server is: whether its URL is this host, and its processes' roots."""

    url: str
    host: HostCheck
    processes: ServerProcesses


def find(config: ServerConfig, url: str) -> RunningServer:
    """The running server at ``url``: its host checked, its roots found (``server.pids``, else
    the process listening on its port)."""
    host = url_host(url)
    return RunningServer(url, host, server_processes(url, config.pids, host.local))


def window_processes(
    running: RunningServer, opener: GpuOpener, measured: Sequence[str]
) -> EngineProcesses:
    """After the window: the server's processes on this host's ``measured`` GPUs (none
    measured: none looked up), through the run's library ``opener``; where no root is known,
    every process on the measured GPUs but llem's (the run states it as a condition)."""
    found = running.processes
    held = None
    if measured and found.roots:
        held = gpus.server_gpus(opener, found.owns)
    elif measured:
        held = gpus.server_gpus(opener, lambda pid: not is_own(pid), only=list(measured))
    return EngineProcesses(
        found.found_by,
        held,
        gpus.RUNNING_COVER,
        gpus.WHO,
        not_found=found.reason,
        on_this_host=running.host.local,
        attributed=bool(found.roots),
    )

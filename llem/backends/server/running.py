"""A server llem did not start (``server.url``): what of its energy this machine can measure, and
whose processes on the measured GPUs are its.

Its energy is this host's GPUs' only where both hold (``energy_refusal``; otherwise the energy is
null with the reason and the remedy, never another GPU's):

- the URL is on this host (``llem.backends.server.host``): llem has no meter of another host's
  GPUs. ``measurement.energy=replay`` (a trace played against the run's clock, which the user
  gives) and ``none`` read no GPU of this host, so they are not refused;
- its GPUs are named, by ``server.gpus`` (or ``measurement.gpu_indices``): llem did not start the
  server and cannot know where it runs before it measures, so it does not guess GPU 0.

After the window (``record``) the server's compute processes are found on the GPUs by its roots
(``llem.backends.server.processes``) and recorded as the server's (``server.processes``), the GPUs
holding them judged against the measured ones (check ``server_gpus``). Where no root is known,
every process on the measured GPUs is taken as the server's, and check ``server_processes`` says
so as a condition: if another program's work ran there, it is in the figures.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from llem.backends.server import gpus
from llem.backends.server.host import HostCheck, url_host
from llem.backends.server.processes import ServerProcesses, server_processes
from llem.config.measurement import MeasurementConfig
from llem.config.server import ServerConfig
from llem.devices.gpu import GpuOpener
from llem.devices.gpus import open_gpus
from llem.measure.family import is_own
from llem.result import RunResult
from llem.vocabulary.model import EngineGpus

CHECK = "server_processes"
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


def record(result: RunResult, running: RunningServer, opener: GpuOpener = open_gpus) -> EngineGpus:
    """After the window: the server's processes on the GPUs into ``result.server`` and the check
    ``server_processes`` into ``result.validity``; returns the GPUs it used, for the run to judge
    (``llem.measure.engine_gpus``)."""
    assert result.server is not None
    found = running.processes
    result.server = dataclasses.replace(
        result.server, on_this_host=running.host.local, processes_found_by=found.found_by
    )
    reasons, checks = result.null_reasons, result.validity.checks
    reasons.pop("server.on_this_host", None)
    if found.found_by is not None:
        reasons.pop("server.processes_found_by", None)
    else:
        reasons["server.processes_found_by"] = (
            f"no process is known as the server's: {found.reason}"
        )
    measured = [g["uuid"] for g in result.hardware.gpus if isinstance(g, dict) and "uuid" in g]
    if not measured or result.energy.source == "replay":
        why = "no GPU of this host was measured: " + (
            "the energy is a replayed trace"
            if result.energy.source == "replay"
            else result.energy.unavailable_reason or "energy unavailable"
        )
        for key in ("server.gpus_used", "server.processes"):
            reasons[key] = why
        checks[CHECK] = "not checked"
        return EngineGpus(None, why, gpus.RUNNING_COVER, gpus.WHO)
    if found.roots:
        used = gpus.record(result, gpus.server_gpus(opener, found.owns), gpus.RUNNING_COVER)
        checks[CHECK] = "passed"
        return used
    _record_unattributed(result, found, measured, opener)
    return EngineGpus(None, result.null_reasons["server.gpus_used"], gpus.RUNNING_COVER, gpus.WHO)


def _record_unattributed(
    result: RunResult, found: ServerProcesses, measured: list[str], opener: GpuOpener
) -> None:
    """No root known: every process on the measured GPUs (but llem's) is taken as the server's,
    stated as a condition."""
    assert result.server is not None
    seen = gpus.server_gpus(opener, lambda pid: not is_own(pid), only=measured)
    result.server = dataclasses.replace(result.server, processes=seen.processes)
    reasons, validity = result.null_reasons, result.validity
    reasons["server.gpus_used"] = f"the server's processes are not known ({found.reason})"
    if seen.processes is None:
        reasons["server.processes"] = seen.null_reason or "not known"
        validity.checks[CHECK] = "not checked"
        return
    reasons.pop("server.processes", None)
    named = ", ".join(f"pid {p['pid']} on {p['device']}" for p in seen.processes)
    validity.conditions.append(
        f"The server's own processes are not known ({found.reason}): every process on the "
        f"measured GPUs ({named}) is taken as the server's; another program's work there would "
        "be in the figures. Name the server's processes with server.pids to check."
        if seen.processes
        else f"No compute process was on the measured GPUs at the window's end, and the "
        f"server's own processes are not known ({found.reason}): the server may not run on "
        "the GPUs named (server.gpus)."
    )
    validity.checks[CHECK] = "condition"

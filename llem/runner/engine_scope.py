"""What a server run's energy takes in, stated in ``result.boundary`` after the window: the
server's processes on the measured GPUs (and that any other work there is in the figures too),
or, where this host's GPUs were not measured, that the server's energy is not in them at all.
Written by the run once the server's facts of the window are (``llem.runner.engine_facts``)."""

from __future__ import annotations

import dataclasses

from llem.result import RunResult


def state_scope(result: RunResult) -> None:
    """``result.boundary.includes`` (and ``outside``) from ``result.server`` and the GPUs the
    window measured."""
    server, boundary = result.server, result.boundary
    if server is None or boundary is None:
        return
    where = f"the server at {server.url}"
    if not boundary.gpus:
        why = result.energy.unavailable_reason or "no GPU was measured"
        outside = [*boundary.outside, f"{where}: its GPUs were not measured ({why})"]
        result.boundary = dataclasses.replace(boundary, outside=outside)
        return
    gpus = ", ".join(boundary.gpus)
    who = (
        f"{server.processes_found_by}, with its descendants"
        if server.processes_found_by
        else "whose processes are not known: every process there was taken as its"
    )
    includes = [
        f"the whole draw of GPU(s) {gpus} over the window, idle power included: the work of "
        f"{where} ({who}) and of any other process there (validity checks other_processes, "
        "server_load)"
    ]
    if boundary.boundary == "node":
        includes.append(
            "this host's CPU packages and DRAM: the server's CPU work (its API process, "
            "tokenizer and scheduler) and llem's client alike"
        )
    result.boundary = dataclasses.replace(boundary, includes=includes)

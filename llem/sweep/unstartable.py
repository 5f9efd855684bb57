"""Telling a SLURM job that will never start from one that waits its turn.

A job that asks for more than its partition allows can stay ``PENDING`` forever (with
``EnforcePartLimits=NO`` sbatch accepts it): squeue then gives a reason such as
``PartitionConfig``, ``PartitionTimeLimit``, ``BadConstraints`` or a per-job QOS or association
limit (``QOSMaxGRESPerJob``). With ``Resources`` or ``ReqNodeNotAvail`` a job normally waits for
busy or drained nodes; it will never start only when no node of its partitions has as many CPUs,
as much memory or as many GPUs as it asks for, which ``sinfo`` tells. Anything that cannot be
read (sinfo fails, a field llem does not understand) concludes nothing: the job keeps waiting.
GPUs are those squeue shows per node (``%b``); GPUs asked per task (``--gpus-per-task``) show no
count there, so such a request is judged by its CPUs and memory only, never wrongly failed.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("llem.sweep")

# squeue reasons that say the job as submitted cannot run (an administrator's change aside).
NEVER = {
    "PartitionConfig": "the request does not fit the partition's configuration",
    "PartitionNodeLimit": "it asks for more nodes than the partition allows",
    "PartitionTimeLimit": "its time limit exceeds the partition's",
    "BadConstraints": "its constraints cannot be satisfied",
    "DependencyNeverSatisfied": "a job it depends on can never finish as required",
    "InvalidQOS": "its QOS is not valid",
    "InvalidAccount": "its account is not valid",
}
PER_JOB_LIMIT = re.compile(r"^(QOS|Assoc)Max\w*PerJob")  # QOSMaxGRESPerJob, AssocMaxCpuPerJobLimit
CAPACITY = ("Resources", "ReqNodeNotAvail")  # waiting for nodes: never only if none could hold it


@dataclass(frozen=True)
class NodeRequest:
    """What a pending job asks of one node (squeue ``%P``, ``%C``, ``%m``, ``%b``)."""

    partition: str
    cpus: int
    memory_mb: float | None  # None: not given (or per CPU: then smaller than per node)
    gpus: int


@dataclass(frozen=True)
class Node:
    cpus: int
    memory_mb: float
    gpus: int


def memory_mb(text: str) -> float | None:
    """``16G`` / ``16000M`` / ``16000`` (MB) / ``1T`` → MB; None when not understood."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)B?\+?", text.strip().upper())
    if not m:
        return None
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[m.group(2)]
    return float(m.group(1)) * scale


def gpus_of(gres: str) -> int | None:
    """GPUs in a GRES/TRES list (``gpu:4``, ``gpu:a100:2(S:0-1)``, ``gres/gpu:1``,
    ``gres:gpu:1``; ``(null)``/``N/A``: 0); None when not understood."""
    total = 0
    for part in gres.strip().split(","):
        part = re.sub(r"\(.*?\)", "", part).strip().removeprefix("gres/").removeprefix("gres:")
        if not part or part in ("(null)", "N/A") or not part.startswith("gpu"):
            continue
        count = part.split(":")[-1]
        if not count.isdigit():
            return None
        total += int(count)
    return total


def parse_request(partition: str, cpus: str, memory: str, tres: str) -> NodeRequest | None:
    gpus = gpus_of(tres)
    if not partition or not cpus.strip().isdigit() or gpus is None:
        return None
    mem = memory_mb(memory)
    return NodeRequest(partition.strip(), int(cpus), mem if mem else None, gpus)


def parse_sinfo(text: str) -> list[Node] | None:
    """``sinfo -h -N -o '%N|%c|%m|%G'`` → nodes; None when a line is not understood."""
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.strip().split("|")
        if len(fields) != 4:
            return None
        cpus, mem, gpus = fields[1].rstrip("+"), memory_mb(fields[2]), gpus_of(fields[3])
        if not cpus.isdigit() or mem is None or gpus is None:
            return None
        nodes.append(Node(int(cpus), mem, gpus))
    return nodes or None


def sinfo(partition: str, timeout_s: float = 30.0) -> list[Node] | None:
    """The nodes of ``partition`` (a comma-separated list is fine); None when sinfo failed."""
    cmd = ["sinfo", "-h", "-N", "-p", partition, "-o", "%N|%c|%m|%G"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("sinfo failed: %s", exc)
        return None
    return parse_sinfo(proc.stdout) if proc.returncode == 0 else None


def fits(request: NodeRequest, node: Node) -> bool:
    memory_ok = request.memory_mb is None or request.memory_mb <= node.memory_mb
    return request.cpus <= node.cpus and memory_ok and request.gpus <= node.gpus


def never_starts(
    reason: str, request: NodeRequest | None, nodes: Callable[[str], list[Node] | None]
) -> str | None:
    """Why a job pending with ``reason`` will never start (a sentence), or None.

    ``nodes(partition)``: the partition's nodes (``sinfo``), None when unknown."""
    code = reason.split(",")[0].strip()
    if code in NEVER:
        return f"pending with reason {code} ({NEVER[code]})"
    if PER_JOB_LIMIT.match(code):
        return f"pending with reason {code} (it exceeds a per-job limit)"
    if not code.startswith(CAPACITY) or request is None:
        return None
    found = nodes(request.partition)
    if not found or any(fits(request, n) for n in found):
        return None
    mem = f", {request.memory_mb / 1024:g} GB" if request.memory_mb else ""
    return (
        f"pending with reason {code}: it asks for {request.cpus} CPUs{mem} and {request.gpus} "
        f"GPUs on one node, more than any node of partition {request.partition} has"
    )

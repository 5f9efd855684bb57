"""What a run ran on, as far as it changes the numbers: the key the summary never pools across.

A run is keyed by what measured each of its figures. Its hardware key is its device, GPU model and
GPU count; for a CPU run also its host and CPU model (``hardware.hostname``,
``environment.cpu.model``); for a GPU run also the GPUs' power limit and the NVIDIA driver
(``hardware.gpus.power_limit_w``, ``environment.driver_version``) where the run recorded them; for
a replayed run (``measurement.energy=replay``; its GPU model reads ``replay:<trace file>``) the
trace measured the energy and this host the throughput and latency, so its key is the trace's
name and device count with the host and CPU model (a replayed device has no power limit or
driver; on device=cuda, the GPU that ran it is not recorded, and the host stands for it); for
a GPU run also the set of GPUs it measured, by UUID (``hardware.gpus.uuid``): energy is measured
over exactly the GPUs a run used, and another GPU, even of the same model, is another instrument,
so runs on different GPU sets are not pooled (a result whose GPUs have no UUID stands apart as
"GPUs not recorded"); for every run the
CPU threads torch used (``hardware.torch_threads``: runs on 2 threads and on 1 are not pooled; a
result that did not record them stands apart as "threads not recorded", and one whose engine runs
its own threads, where llem sets none and the result's null reason says so, as "the engine's own
threads"). Only ok runs record their hardware; see :func:`configuration_groups` for the others.
The threads are how a run used its hardware, not the hardware: ``hardware_kind`` is the label
without them, for counting kinds of hardware.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import pandas as pd

from llem.report.cells import is_missing
from llem.report.ttft_origin import origin_of_rows, split_by_origin


class _Runs(Protocol):
    """``llem.report.load.Runs`` (which imports this module): its table of runs."""

    frame: pd.DataFrame


#: the summary's hardware label column (present when the hardware differs between runs)
GPU = "gpu"

#: the label of a run that recorded its hardware but states no device (``device`` null with its
#: reason: a server llem did not start, on GPUs not named by ``server.gpus``)
NOT_STATED = "device not stated"

#: how a replayed run's GPU model starts (``replay:<trace file name>``, llem.measure.sources)
REPLAY = "replay:"


class HardwareKey(NamedTuple):
    """What a run actually used; None where it is not known (or does not apply)."""

    device: str | None
    gpu_model: str | None
    gpu_count: int | None
    host: str | None = None  # CPU runs
    cpu_model: str | None = None  # CPU runs
    power_limit_w: str | None = None  # GPU runs: each GPU's limit, " + "-joined when they differ
    driver: str | None = None  # GPU runs
    threads: str | None = None  # torch's intra-op threads (hardware.torch_threads)
    gpus: str | None = None  # GPU runs: the measured GPUs' UUIDs, sorted, " + "-joined


#: the key's details beyond device, model and count: their results.csv column, how a label says them
DETAILS = {
    "host": ("hardware.hostname", "on {}"),
    "cpu_model": ("environment.cpu.model", "{}"),
    "power_limit_w": ("hardware.gpus.power_limit_w", "{} W limit"),
    "driver": ("environment.driver_version", "driver {}"),
    "threads": ("hardware.torch_threads", "{} threads"),
    "gpus": ("hardware.gpus.uuid", "GPUs {}"),
}

#: ``HardwareKey.threads`` of a run whose engine runs its own threads (vLLM, a server): llem
#: sets none, and the result's null reason for ``hardware.torch_threads`` says so
ENGINE_THREADS = "engine"
_ENGINE_THREADS_LABEL = "the engine's own threads"

#: how many characters of a GPU UUID a label shows (``GPU-`` and its first 8 hex digits)
UUID_SHOWN = 12


def hardware_facts(run_dir: Path, result: dict[str, Any]) -> dict[str, Any]:
    """The results.csv columns of ``DETAILS`` that the result lacks, where the run recorded them:
    the GPUs' power limits (from the result), the CPU model and the driver (``environment.json``).
    """
    try:
        env = json.loads((run_dir / "environment.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        env = None
    env = env if isinstance(env, dict) else {}
    cpu = env.get("cpu")
    gpus = (result.get("hardware") or {}).get("gpus") or []
    limits = [g.get("power_limit_w") for g in gpus if isinstance(g, dict)]
    uuids = [g.get("uuid") for g in gpus if isinstance(g, dict)]
    named = [u for u in uuids if isinstance(u, str) and u]
    facts = {
        "environment.cpu.model": cpu.get("model") if isinstance(cpu, dict) else None,
        "environment.driver_version": env.get("driver_version"),
        "hardware.gpus.power_limit_w": " + ".join(sorted({f"{w:g}" for w in limits}))
        if limits and all(isinstance(w, (int, float)) for w in limits)
        else None,
        "hardware.gpus.uuid": " + ".join(sorted(named))
        if named and len(named) == len(uuids)
        else None,
    }
    return {k: v for k, v in facts.items() if v is not None}


def device_column(frame: pd.DataFrame) -> str:
    """The column with the device a run used: ``result.device`` when ``device`` was swept."""
    return "result.device" if "result.device" in frame.columns else "device"


def hardware_key(frame: pd.DataFrame, i: int) -> HardwareKey | None:
    """What row ``i`` ran on, or None when it did not record it (only ok runs do)."""
    if str(frame["status"].iloc[i]) != "ok":
        return None

    def cell(column: str) -> str | None:
        if column not in frame.columns:
            return None
        v = frame[column].iloc[i]
        return None if is_missing(v) else str(v)

    count, model, device = (
        cell("hardware.gpu_count"),
        cell("hardware.gpu_model"),
        cell(device_column(frame)),
    )
    threads = cell(DETAILS["threads"][0])
    if threads is None and cell("null_reasons." + DETAILS["threads"][0]) is not None:
        threads = ENGINE_THREADS  # not missing: the engine runs threads of its own
    key = HardwareKey(
        device,
        model,
        int(float(count)) if count and model else None,
        threads=str(int(float(threads))) if threads and threads != ENGINE_THREADS else threads,
    )
    host = key._replace(host=cell(DETAILS["host"][0]), cpu_model=cell(DETAILS["cpu_model"][0]))
    if model is not None and model.startswith(REPLAY):
        return host  # the trace measured the energy, this host everything else
    if model is not None:
        limits = cell(DETAILS["power_limit_w"][0])
        return key._replace(
            power_limit_w=limits, driver=cell(DETAILS["driver"][0]), gpus=cell(DETAILS["gpus"][0])
        )
    return host if device == "cpu" else key


def varying_details(keys: Sequence[HardwareKey | None]) -> list[str]:
    """The details (``DETAILS``) in which runs of the same device, GPU model and count differ."""
    known = [k for k in keys if k is not None]
    varying = []
    for name in DETAILS:
        those = [k for k in known if _applies(k, name)]
        if len({(*k[:3], getattr(k, name)) for k in those}) > len({k[:3] for k in those}):
            varying.append(name)
    return varying


def _applies(key: HardwareKey, name: str) -> bool:
    replayed = key.gpu_model is not None and key.gpu_model.startswith(REPLAY)
    gpu = key.gpu_model is not None and not replayed
    if name == "threads":
        return True
    if name in ("power_limit_w", "driver", "gpus"):
        return gpu
    return replayed or (not gpu and key.device == "cpu")


def hardware_label(key: HardwareKey | None, details: Sequence[str] = ()) -> str:
    """``NVIDIA A100-SXM4-80GB ×2``; CPU: ``cpu``; no device: ``device not stated``; with the
    ``details`` that tell rows apart
    (``NVIDIA A100-SXM4-80GB ×1 · 250 W limit``, ``cpu · on node-2``, ``cpu · 4 threads``)."""
    if key is None:
        return "unknown"
    if key.gpu_model is not None:
        base = f"{key.gpu_model} ×{key.gpu_count}" if key.gpu_count else key.gpu_model
    elif key.device is None:  # the run stated none (a server llem did not start: null device)
        return NOT_STATED
    else:
        base = key.device if key.device == "cpu" else f"{key.device} (GPU model not recorded)"
    said = [_detail(key, name) for name in details if _applies(key, name)]
    return " · ".join([base, *said])


def hardware_kind(label: str) -> str:
    """A ``hardware_label`` without its threads detail (``cpu · 2 threads`` -> ``cpu``): the
    hardware itself, which runs on other thread counts or engines share."""
    parts = label.split(" · ")
    return " · ".join(p for p in parts if not _is_threads_detail(p))


def _is_threads_detail(part: str) -> bool:
    return part in ("threads not recorded", "1 thread", _ENGINE_THREADS_LABEL) or (
        part.endswith(" threads") and part.split(" ")[0].isdigit()
    )


def _detail(key: HardwareKey, name: str) -> str:
    """``250 W limit``, ``4 threads``; ``threads not recorded``, ``driver not recorded``."""
    value = getattr(key, name)
    if name == "threads" and value is None:
        return "threads not recorded"
    if name == "threads" and value == ENGINE_THREADS:
        return _ENGINE_THREADS_LABEL
    if name == "threads" and value == "1":
        return "1 thread"
    if name == "gpus" and value is not None:
        value = " + ".join(u[:UUID_SHOWN] for u in value.split(" + "))
    return DETAILS[name][1].format("not recorded" if value is None else value)


@dataclass(frozen=True)
class Group:
    """One configuration on one kind of hardware: the rows of ``runs.frame`` it pools."""

    config_hash: str
    hardware: HardwareKey | None
    rows: list[int]


def configuration_groups(runs: _Runs) -> list[Group]:
    """Runs pooled for statistics: same ``config_hash``, same hardware key AND same TTFT origin
    (``llem.report.ttft_origin``: TTFTs from different origins are different figures).

    A run that recorded no hardware (failed, skipped, missing) joins its configuration's ok runs
    when they all ran on one kind of hardware, and their origin when they have one; otherwise it
    stands on its own. Groups come in the order of their first row (``runs.frame`` is sorted by
    knob values).
    """
    frame = runs.frame
    hashes = [str(h) for h in frame["config_hash"].astype(object).tolist()]
    keys = [hardware_key(frame, i) for i in range(len(frame))]
    known: dict[str, list[HardwareKey]] = {}
    for h, k in zip(hashes, keys, strict=True):
        if k is not None and k not in known.setdefault(h, []):
            known[h].append(k)
    pooled: list[tuple[str, HardwareKey | None]] = []
    for h, k in zip(hashes, keys, strict=True):
        if k is None and len(known.get(h, [])) == 1:
            k = known[h][0]
        pooled.append((h, k))
    groups: dict[Any, list[int]] = {}
    for i, key in enumerate(split_by_origin(pooled, origin_of_rows(frame))):
        groups.setdefault(key, []).append(i)
    return [Group(h, k, rows) for ((h, k), _), rows in groups.items()]


def hardware_varies(groups: Sequence[Group]) -> bool:
    """More than one kind of hardware among the runs that recorded theirs."""
    return len({g.hardware for g in groups if g.hardware is not None}) > 1


def with_hardware(
    row: dict[str, Any], group: Group, dev_col: str, details: Sequence[str]
) -> dict[str, Any]:
    """The row with the hardware columns after the knobs (before ``n``): device, GPU model and
    count, the ``details`` that differ between rows, and the label (``gpu``)."""
    key = group.hardware or HardwareKey(None, None, None)
    hardware: dict[str, Any] = {
        dev_col: key.device,
        "hardware.gpu_model": key.gpu_model,
        "hardware.gpu_count": key.gpu_count,
    }
    for name in details:
        hardware[DETAILS[name][0]] = getattr(key, name)
    hardware[GPU] = hardware_label(group.hardware, details)
    at = list(row).index("n")
    items = list(row.items())
    return dict(items[:at]) | hardware | dict(items[at:])

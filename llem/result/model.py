"""result.json: the typed, versioned result of one run, and the only code that reads or writes it.

A ``RunResult`` is a tree of dataclasses, one per section (workload, latency, throughput, energy,
memory, thermal, compute, lifecycle, sweep position, validity; see ``llem.result.sections``; and
traffic, concurrency, steady state, goodput: ``llem.result.serving``). Every
figure that was not measured is ``None`` and its dotted key is in ``null_reasons`` with the reason;
no figure is a stand-in 0. ``set_figure`` sets a figure, its bound and its null reason together.

``RunResult.write(run_dir)`` writes ``run_dir/result.json`` atomically; ``RunResult.read(run_dir)``
and ``RunResult.from_json(path)`` read one back, migrating older schema versions (see
``llem.result.migrate``). Reading rejects keys this schema does not know, so a reader never guesses.
"""

from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llem.atomic import atomic_write_text
from llem.plain import json_ready
from llem.result.boundary import Boundary
from llem.result.figure import Figure, read_figure, with_figures
from llem.result.footprint import Footprint, Layers
from llem.result.gpu import GpuSection
from llem.result.migrate import SCHEMA_VERSION, ResultFormatError, migrate
from llem.result.quality import Quality
from llem.result.sections import (
    Compute,
    Energy,
    ErrorInfo,
    Hardware,
    Lifecycle,
    Memory,
    SweepPosition,
    Thermal,
    Throughput,
    Validity,
    Workload,
    utc_now,
)
from llem.result.server import ServerSection
from llem.result.serving import Concurrency, Goodput, Latency, SteadyState, Traffic
from llem.result.speculative import SpeculativeSection
from llem.version import __version__

RESULT_FILE = "result.json"
STATUSES = ("ok", "failed", "skipped")


@dataclass
class RunResult:
    """One run's result.json: its sections and fields are listed in docs/results.md ("What a run
    writes"); files from older versions are read through llem.result.migrate."""

    status: str  # ok | failed | skipped
    schema_version: int = SCHEMA_VERSION
    llem_version: str = __version__
    error: ErrorInfo | None = None
    config_hash: str | None = None
    overrides: list[str] = field(default_factory=list)
    started_at: str = field(default_factory=utc_now)
    duration_s: float | None = None
    model: str | None = None
    backend: str | None = None
    device: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    weights: str | None = None  # pretrained | random (model.weights); null before schema 4
    workload: Workload = field(default_factory=Workload)
    latency: Latency = field(default_factory=Latency)
    throughput: Throughput = field(default_factory=Throughput)
    energy: Energy = field(default_factory=Energy)
    memory: Memory = field(default_factory=Memory)
    thermal: Thermal = field(default_factory=Thermal)
    compute: Compute = field(default_factory=Compute)
    validity: Validity = field(default_factory=Validity)
    hardware: Hardware = field(default_factory=Hardware)
    # schema 3 (llem.result.serving); a null section has its reason in null_reasons
    traffic: Traffic | None = None
    concurrency: Concurrency | None = None
    steady_state: SteadyState | None = None
    goodput: Goodput | None = None
    gpu: GpuSection | None = None  # schema 4 (llem.result.gpu)
    quality: Quality | None = None  # schema 6 (llem.result.quality); null: nothing was scored
    boundary: Boundary | None = None  # schema 6 (llem.result.boundary): what the energy covers
    server: ServerSection | None = None  # schema 6 (llem.result.server); null: in-process engine
    # llem.result.speculative; null with the reason: speculative=none, or an older file
    speculative: SpeculativeSection | None = None
    # llem.result.footprint; null with the reason: nothing asked for, or an older file
    layers: Layers | None = None
    footprint: Footprint | None = None
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    sweep: SweepPosition | None = None
    null_reasons: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] | None = None

    # ------------------------------------------------------------------ json
    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data, in schema order."""
        plain: dict[str, Any] = json_ready(self)
        return plain

    @classmethod
    def from_json(cls, data: dict[str, Any] | str | Path) -> RunResult:
        """Build from parsed JSON data, or from a path to a result.json (older schemas migrate)."""
        if isinstance(data, (str, Path)):
            path = Path(data)
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ResultFormatError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ResultFormatError(f"result.json holds a {type(data).__name__}, not an object")
        result: RunResult = _build(cls, migrate(dict(data)), "")
        return result

    def write(self, run_dir: Path | str, *, replace: bool = True) -> Path:
        """Write ``run_dir/result.json`` atomically: the only writer of result files.

        ``replace=False``: raise FileExistsError rather than replace a result.json that exists,
        decided by the file system itself (a hard link, atomic on NFS too; exclusive creation
        where hard links are not supported), not by a look first.
        """
        text = json.dumps(self.to_json(), indent=2, default=str) + "\n"
        path = Path(run_dir) / RESULT_FILE
        if replace:
            return atomic_write_text(path, text)
        staged = atomic_write_text(path.with_name(f".{RESULT_FILE}.{os.getpid()}.new"), text)
        try:
            os.link(staged, path)
        except FileExistsError:
            raise
        except OSError:  # a file system without hard links: exclusive creation instead
            with open(path, "x", encoding="utf-8") as fh:
                fh.write(text)
        finally:
            staged.unlink(missing_ok=True)
        return path

    @classmethod
    def read(cls, run_dir: Path | str) -> RunResult | None:
        """``run_dir/result.json``, or None when it is absent or unreadable."""
        path = Path(run_dir) / RESULT_FILE
        try:
            return cls.from_json(path)
        except (OSError, ResultFormatError):
            return None

    def fail(self, error: ErrorInfo) -> None:
        self.status, self.error = "failed", error

    # ------------------------------------------------------------------ figures
    def set_figures(self, section: str, figures: dict[str, Figure | dict[str, Figure]]) -> None:
        """Set figures of one section (``"energy"``) with their bounds and null reasons together;
        earlier reasons of those figures go."""
        current = getattr(self, section)
        updated, reasons = with_figures(current, section, figures)
        for name in figures:
            for key in list(self.null_reasons):
                if key == f"{section}.{name}" or key.startswith(
                    (
                        f"{section}.{name}.",
                        f"{section}.{name}_uncertainty",
                        f"{section}.{name}_ci95_half_width",
                    )
                ):
                    del self.null_reasons[key]
        setattr(self, section, updated)
        self.null_reasons.update(reasons)

    def set_figure(self, key: str, value: Figure) -> None:
        """``set_figure("memory.peak_device_used_mb", Figure(...))``: see ``set_figures``."""
        section, name = key.split(".", 1)
        self.set_figures(section, {name: value})

    def figure(self, key: str) -> Figure:
        """The figure at ``key`` (``"energy.total_j"``) with its bound and null reason."""
        section, name = key.split(".", 1)
        return read_figure(getattr(self, section), section, name, self.null_reasons)


def write_unmeasured(
    run_dir: Path | str,
    *,
    status: str,
    error: ErrorInfo,
    config_hash: str | None,
    overrides: list[str],
    sweep: SweepPosition | None = None,
    slurm_job_id: str | None = None,
    node: str | None = None,
    replace: bool = True,
) -> Path:
    """A result for a run that never measured anything (skipped, failed before or outside it;
    a SLURM job's id and node where one ran it); with ``replace=False`` FileExistsError when one
    exists (``RunResult.write``)."""
    record = RunResult(
        status=status, error=error, config_hash=config_hash, overrides=list(overrides), sweep=sweep
    )
    record.lifecycle.slurm_job_id, record.lifecycle.node = slurm_job_id, node
    return record.write(run_dir, replace=replace)


# --------------------------------------------------------------------------- (de)serialisation


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ResultFormatError(f"{where or 'result'}: expected an object, got {data!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ResultFormatError(
            f"unknown key(s) in result.json: {', '.join(where + k for k in unknown)}"
        )
    hints = _hints(cls)
    kwargs = {k: _convert(hints[k], v, f"{where}{k}") for k, v in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:  # a required field is missing, a bound without value
        raise ResultFormatError(f"{where or 'result'}: {exc}") from None


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _convert(args[0], value, where) if len(args) == 1 else value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build(tp, value, f"{where}.")
    if origin in (dict, list):
        return _container(origin, typing.get_args(tp), value, where)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _container(origin: type, args: tuple[Any, ...], value: Any, where: str) -> Any:
    """A copy of a JSON object or list; a dict's values or a list's items that are records
    (dataclasses: ``list[GpuRecord]``) built one by one."""
    if origin is dict and isinstance(value, dict):
        record = _record(args[1:])
        if record is None:
            return dict(value)
        return {k: _build(record, v, f"{where}.{k}.") for k, v in value.items()}
    if origin is list and isinstance(value, list):
        record = _record(args)
        if record is None:
            return list(value)
        return [_build(record, v, f"{where}[{i}].") for i, v in enumerate(value)]
    kind = "an object" if origin is dict else "a list"
    raise ResultFormatError(f"{where}: expected {kind}, got {value!r}")


def _record(args: tuple[Any, ...]) -> type | None:
    """The dataclass a list's items or a dict's values are (built one by one), or None: they
    stay as the JSON holds them."""
    if len(args) == 1 and dataclasses.is_dataclass(args[0]) and isinstance(args[0], type):
        return args[0]
    return None

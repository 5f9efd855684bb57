"""result.json: the typed, versioned result of one run, and the only code that reads or writes it.

A ``RunResult`` is a tree of dataclasses, one per section (workload, latency, throughput, energy,
memory, thermal, compute, lifecycle, sweep position, validity). Every figure that was not measured
is ``None`` and its dotted key is in ``null_reasons`` with the reason; no figure is a stand-in 0.

``RunResult.write(run_dir)`` writes ``run_dir/result.json`` atomically; ``RunResult.read(run_dir)``
and ``RunResult.from_json(path)`` read one back, migrating older schema versions. Reading rejects
keys this schema does not know, so a reader never guesses.

Schema history:
  1  (llem 0.1.0) the first layout; written as a plain dict.
  2  typed sections; ``sweep`` always present (null outside a sweep); ``validity``;
     ``hardware``; ``workload.requests`` always present; ``throughput.output_tokens_per_s`` is
     over the measured window (version 1: over the time inside generate(), now
     ``generate_output_tokens_per_s``); energy uncertainty bounds. Version 1 files migrate.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import llem
from llem.atomic import atomic_write_text

SCHEMA_VERSION = 2
RESULT_FILE = "result.json"
STATUSES = ("ok", "failed", "skipped")


class ResultFormatError(ValueError):
    """A result.json this version of llem cannot read (unknown key, bad type, newer schema)."""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def quantization_label(load_in_4bit: bool, load_in_8bit: bool, quant_type: str | None) -> str:
    if load_in_4bit:
        return f"bnb-4bit-{quant_type}" if quant_type else "bnb-4bit"
    if load_in_8bit:
        return "bnb-8bit"
    return "none"


# --------------------------------------------------------------------------- sections


@dataclass
class Percentiles:
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


@dataclass
class ErrorInfo:
    type: str
    message: str
    hint: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorInfo:
        """A known llem error as it was raised; anything else by its type and first line."""
        from llem.errors import LlemError, first_line

        if isinstance(exc, LlemError):
            return cls(type(exc).__name__, exc.message, exc.hint)
        if isinstance(exc, KeyboardInterrupt):
            return cls("KeyboardInterrupt", "interrupted")
        return cls(
            type(exc).__name__,
            first_line(exc),
            "see llem.log in the run directory for the traceback",
        )


@dataclass
class Workload:
    n_prompts: int | None = None
    batch_size: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    passes: int | None = None
    requests: int | None = None
    chat_template_applied: bool | None = None
    output_tokens_definition: str = "generated tokens up to and including the first EOS, no padding"


@dataclass
class Latency:
    generate_s: float | None = None
    ttft_ms: Percentiles = field(default_factory=Percentiles)
    itl_ms: Percentiles = field(default_factory=Percentiles)
    request_latency_s: Percentiles = field(default_factory=Percentiles)


@dataclass
class Throughput:
    output_tokens_per_s: float | None = None  # over the measured window, as J per token is
    requests_per_s: float | None = None
    generate_output_tokens_per_s: float | None = None  # over the time inside generate() only
    definition: str = (
        "output tokens / measured window seconds (the window energy is measured over, so "
        "avg_power_w / output_tokens_per_s = j_per_output_token); generate_output_tokens_per_s "
        "divides by the seconds inside generate() only"
    )


@dataclass
class Energy:
    source: str = "unavailable"  # nvml_counter | nvml_power | replay | unavailable
    unavailable_reason: str | None = None
    window_s: float | None = None
    total_j: float | None = None
    per_device_j: dict[str, float | None] = field(default_factory=dict)
    idle_power_w: float | None = None
    idle_adjusted_j: float | None = None
    j_per_output_token: float | None = None
    j_per_request: float | None = None
    avg_power_w: float | None = None
    peak_power_w: float | None = None
    warnings: list[str] = field(default_factory=list)
    cpu_source: str | None = None
    cpu_package_j: float | None = None
    cpu_unavailable_reason: str | None = None
    j_per_total_token: float | None = None  # input + output tokens
    output_tokens_per_j: float | None = None
    wh_per_1k_requests: float | None = None  # AI Energy Score's unit
    # Worst-case bounds (same unit as the figure) from the source: see the README.
    total_j_uncertainty: float | None = None
    per_device_j_uncertainty: dict[str, float | None] | None = None
    idle_power_w_uncertainty: float | None = None
    idle_adjusted_j_uncertainty: float | None = None
    j_per_output_token_uncertainty: float | None = None
    j_per_total_token_uncertainty: float | None = None
    j_per_request_uncertainty: float | None = None
    wh_per_1k_requests_uncertainty: float | None = None
    avg_power_w_uncertainty: float | None = None
    output_tokens_per_j_uncertainty: float | None = None
    uncertainty_method: str | None = None
    idle_source: str | None = None  # measured_this_run | reused_from_process | not_measured
    idle_measured_at: str | None = None
    idle_age_s: float | None = None
    other_processes: list[dict[str, Any]] | None = None  # [{device, pid, used_memory_mb}]
    definition: str | None = None


@dataclass
class Memory:
    """MB here is 2^20 bytes."""

    peak_allocated_mb: float | None = None
    peak_reserved_mb: float | None = None
    peak_device_used_mb: float | None = None
    peak_host_rss_mb: float | None = None
    per_device: dict[str, dict[str, float]] = field(default_factory=dict)  # cuda:i -> peaks


@dataclass
class Thermal:
    max_temp_c: float | None = None
    throttled: bool | None = None
    throttle_reasons: list[str] = field(default_factory=list)


@dataclass
class Compute:
    flops_estimate: float | None = None
    flops_formula: str = (
        "2 x (parameters - input embedding + tied LM head) x num_beams x (input + output tokens)"
    )
    parameters: int | None = None  # real count (quantization packing undone)
    matmul_parameters: int | None = None
    decode_bandwidth_utilisation: float | None = None
    decode_bytes_per_s: float | None = None
    decode_weight_bytes: int | None = None  # summed over the timed decode steps
    decode_kv_bytes: int | None = None  # KV-cache reads, summed over the timed decode steps
    memory_bandwidth_bytes_per_s: float | None = None  # the one GPU a decode step runs on
    non_embedding_parameters: int | None = None  # schema 1 only


@dataclass
class Hardware:
    """What the numbers were measured on (the report never pools runs across different hardware)."""

    hostname: str | None = None
    gpu_model: str | None = None  # the measured GPUs' name ("A + B" when they differ); None: CPU
    gpu_count: int = 0
    gpus: list[dict[str, Any]] = field(default_factory=list)  # uuid, name, memory, power limit


@dataclass
class Lifecycle:
    backend_chosen_by: str | None = None  # config | detected
    preflight_warnings: list[str] = field(default_factory=list)
    load_s: float | None = None
    model_reused: bool | None = None
    model_source: str | None = None
    load_kwargs: dict[str, Any] = field(default_factory=dict)
    torch_compile: str | None = None  # what ran in the window: active | failed: ... | None (off)
    seed: int | None = None  # torch seed of this run (seed + repeat for a sampling decoder)
    warmup_s: float | None = None
    cooldown_waited_s: float | None = None
    start_temp_c: float | None = None
    # The scheduler's job that ran this point (SLURM_JOB_ID) and its node (SLURMD_NODENAME);
    # null outside a SLURM job.
    slurm_job_id: str | None = None
    node: str | None = None


@dataclass
class SweepPosition:
    """A sweep point's grid index (= its directory name) and its place in the run order."""

    grid_index: int
    position: int | None
    of: int
    order: str
    seed: int


@dataclass
class Validity:
    """Whether the energy figure can be trusted: a verdict, its problems, and each check."""

    energy_valid: bool | None = None
    problems: list[str] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)


@dataclass
class RunResult:
    """One run's result.json (see the README's schema section for every field)."""

    status: str  # ok | failed | skipped
    schema_version: int = SCHEMA_VERSION
    llem_version: str = llem.__version__
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
    workload: Workload = field(default_factory=Workload)
    latency: Latency = field(default_factory=Latency)
    throughput: Throughput = field(default_factory=Throughput)
    energy: Energy = field(default_factory=Energy)
    memory: Memory = field(default_factory=Memory)
    thermal: Thermal = field(default_factory=Thermal)
    compute: Compute = field(default_factory=Compute)
    validity: Validity = field(default_factory=Validity)
    hardware: Hardware = field(default_factory=Hardware)
    lifecycle: Lifecycle = field(default_factory=Lifecycle)
    sweep: SweepPosition | None = None
    null_reasons: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] | None = None

    # ------------------------------------------------------------------ json
    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON data, in schema order."""
        return _to_plain(self)

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
        return _build(cls, migrate(dict(data)), "")

    def write(self, run_dir: Path | str) -> Path:
        """Write ``run_dir/result.json`` atomically: the only writer of result files."""
        text = json.dumps(self.to_json(), indent=2, default=str) + "\n"
        return atomic_write_text(Path(run_dir) / RESULT_FILE, text)

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


def write_record(
    run_dir: Path | str,
    *,
    status: str,
    error: ErrorInfo,
    config_hash: str | None,
    overrides: list[str],
    sweep: SweepPosition | None = None,
) -> Path:
    """A result for a run that never measured anything (skipped, failed before or outside it)."""
    record = RunResult(
        status=status, error=error, config_hash=config_hash, overrides=list(overrides), sweep=sweep
    )
    return record.write(run_dir)


# --------------------------------------------------------------------------- migration


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring parsed result data of any earlier schema version to the current one."""
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ResultFormatError(
            f"result.json has schema_version {version!r}; this llem ({llem.__version__}) reads "
            f"versions 1 to {SCHEMA_VERSION}: upgrade llem to read it"
        )
    if version == 1:
        data = _migrate_1_to_2(data)
    return data


def _migrate_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    # Version 1 wrote the same sections as plain dicts; what version 2 adds has defaults
    # (validity, sweep: null). A v1 "lifecycle" could be empty for points that never ran.
    data = dict(data)
    data["schema_version"] = 2
    if "status" not in data:  # early partial files: ok unless they carry an error
        data["status"] = "failed" if data.get("error") else "ok"
    if isinstance(data.get("error"), str):
        data["error"] = {"type": "Error", "message": data["error"], "hint": None}
    data.setdefault("sweep", None)
    throughput = data.get("throughput")
    if isinstance(throughput, dict) and "generate_output_tokens_per_s" not in throughput:
        # v1's rates were over the time inside generate(); v2's are over the measured window,
        # recomputed from v1's own window length where it has one.
        throughput = dict(throughput)
        throughput["generate_output_tokens_per_s"] = throughput.get("output_tokens_per_s")
        throughput.pop("definition", None)
        window_s = (data.get("energy") or {}).get("window_s")
        work = data.get("workload") or {}
        for key, count in (
            ("output_tokens_per_s", "output_tokens"),
            ("requests_per_s", "requests"),
        ):
            n = work.get(count)
            throughput[key] = None
            if isinstance(window_s, (int, float)) and window_s > 0 and isinstance(n, int):
                throughput[key] = round(n / window_s, 3 if count == "output_tokens" else 4)
        data["throughput"] = throughput
    workload = data.get("workload")
    if isinstance(workload, dict) and "requests" not in workload:
        workload = dict(workload)
        workload["requests"] = None
        data["workload"] = workload
    return data


# --------------------------------------------------------------------------- (de)serialisation


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_plain(v) for v in value]
    return value


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
    except TypeError as exc:  # a required field is missing
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
    if origin is dict:
        if not isinstance(value, dict):
            raise ResultFormatError(f"{where}: expected an object, got {value!r}")
        return dict(value)
    if origin is list:
        if not isinstance(value, list):
            raise ResultFormatError(f"{where}: expected a list, got {value!r}")
        return list(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value

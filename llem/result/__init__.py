"""The typed, versioned result model and its files: ``result.json`` (``RunResult``, with its
sections and figures) and ``generations.jsonl``. The only code that reads or writes run files.
"""

from llem.result.figure import Figure
from llem.result.generations import GENERATIONS_FILE, write_generations
from llem.result.migrate import SCHEMA_VERSION, ResultFormatError, migrate
from llem.result.model import RESULT_FILE, STATUSES, RunResult, write_record
from llem.result.sections import (
    Compute,
    Energy,
    ErrorInfo,
    Hardware,
    Latency,
    Lifecycle,
    Memory,
    Percentiles,
    SweepPosition,
    Thermal,
    Throughput,
    Validity,
    Workload,
    quantization_label,
    utc_now,
)

__all__ = [
    "GENERATIONS_FILE",
    "RESULT_FILE",
    "SCHEMA_VERSION",
    "STATUSES",
    "Compute",
    "Energy",
    "ErrorInfo",
    "Figure",
    "Hardware",
    "Latency",
    "Lifecycle",
    "Memory",
    "Percentiles",
    "ResultFormatError",
    "RunResult",
    "SweepPosition",
    "Thermal",
    "Throughput",
    "Validity",
    "Workload",
    "migrate",
    "quantization_label",
    "utc_now",
    "write_generations",
    "write_record",
]

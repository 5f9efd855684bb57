"""The typed, versioned result model and its files: ``result.json`` (``RunResult``, with its
sections and figures), ``generations.jsonl`` and ``requests.jsonl``. The only code that reads or
writes run files.

Imports llem.vocabulary, llem.config and the base modules; writes the run files.
"""

from llem.result.boundary import Boundary
from llem.result.figure import Figure
from llem.result.generations import GENERATIONS_FILE, write_generations
from llem.result.migrate import SCHEMA_VERSION, ResultFormatError, migrate
from llem.result.model import RESULT_FILE, STATUSES, RunResult, write_unmeasured
from llem.result.quality import Quality
from llem.result.requests import REQUESTS_FILE, RequestRecord, read_requests, write_requests
from llem.result.sections import (
    Compute,
    Energy,
    ErrorInfo,
    FitRecord,
    GpuRecord,
    Hardware,
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
from llem.result.server import ServerSection
from llem.result.serving import (
    Concurrency,
    Goodput,
    Latency,
    Lateness,
    SteadyState,
    Traffic,
)
from llem.result.speculative import SpeculativeSection
from llem.result.steps import STEPS_FILE, StepRecord, read_steps, write_steps

__all__ = [
    "GENERATIONS_FILE",
    "REQUESTS_FILE",
    "RESULT_FILE",
    "SCHEMA_VERSION",
    "ServerSection",
    "SpeculativeSection",
    "STATUSES",
    "Boundary",
    "Compute",
    "Concurrency",
    "Energy",
    "ErrorInfo",
    "Figure",
    "FitRecord",
    "Goodput",
    "GpuRecord",
    "Hardware",
    "Latency",
    "Lateness",
    "Lifecycle",
    "Memory",
    "Percentiles",
    "Quality",
    "RequestRecord",
    "ResultFormatError",
    "RunResult",
    "SteadyState",
    "SweepPosition",
    "Thermal",
    "Throughput",
    "Traffic",
    "Validity",
    "Workload",
    "migrate",
    "quantization_label",
    "read_requests",
    "read_steps",
    "write_steps",
    "StepRecord",
    "STEPS_FILE",
    "utc_now",
    "write_generations",
    "write_requests",
    "write_unmeasured",
]

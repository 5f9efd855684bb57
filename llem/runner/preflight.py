"""Pre-flight: everything that can be checked before a model is loaded, all failures at once.

``preflight(exp)`` never stops at the first problem: it runs every check and raises one
``PreflightError`` (exit 3) listing them all. Warnings (e.g. GPU persistence mode off, a
``measurement.boundary=node`` of which only part can be read) are returned, never raised. CPU-only
is a supported mode: ``device=auto`` falls back to the CPU and energy is then reported as
unavailable; only a node boundary of which no part can be read is refused
(``llem.measure.node_check``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llem.backends import create_backend, sections
from llem.backends.models import model_problem
from llem.backends.random_weights import DEFAULT_MODEL_GROUP
from llem.config.engines import Engine, active_engine, install_hint, speculative_refusal
from llem.config.measurement import MeasurementConfig
from llem.config.model import ModelConfig
from llem.config.schema import Device, ExperimentConfig
from llem.devices.gpu import GpuOpener, GpuUnavailable, on_gpu
from llem.devices.gpus import gpu_device_type, open_gpus
from llem.errors import PreflightError
from llem.measure import MeasurementSession
from llem.runner.footprint import footprint_preflight
from llem.runner.gpu_settings import gpu_preflight_problems
from llem.runner.prompts import check_dataset
from llem.vocabulary.engine import Backend

log = logging.getLogger(__name__)


@dataclass
class PreflightReport:
    device: str  # the device the run will use: "cuda" or "cpu"
    warnings: list[str] = field(default_factory=list)


# The device nodes a GPU's driver makes on Linux, one of which torch needs to see any CUDA or ROCm
# device: NVIDIA's (also what a container with GPUs is given), Jetson's, WSL's paravirtual GPU
# and AMD's KFD.
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvmap", "/dev/dxg", "/dev/kfd")


def cuda_available(nodes: Sequence[str] = GPU_DEVICE_NODES) -> bool:
    """Whether torch sees a CUDA (or ROCm) device. On Linux without any of ``nodes`` it cannot,
    and torch is not imported to ask (2 of a dry run's 4 CPU-seconds)."""
    if importlib.util.find_spec("torch") is None:
        return False
    if sys.platform.startswith("linux") and not any(os.path.exists(n) for n in nodes):
        return False
    import torch

    return bool(torch.cuda.is_available())


def _persistence_mode_warning(gpus: GpuOpener = open_gpus) -> list[str]:
    try:
        lib = gpus()
    except GpuUnavailable:
        return []
    try:
        off = lib.persistence_off()
    finally:
        lib.shutdown()
    if not off:
        return []
    return [
        f"GPU persistence mode is off on NVML device(s) {', '.join(map(str, off))}: the first "
        "NVML calls and CUDA start-up are slower (sudo nvidia-smi -pm 1 turns it on)"
    ]


def resolve_device(requested: Device, has_cuda: bool) -> str:
    if requested == Device.cpu:
        return "cpu"
    if requested == Device.cuda:
        return "cuda"
    return "cuda" if has_cuda else "cpu"


class PreflightMemo:
    """The slow checks' answers (the hub's about a model, a JSONL file read, a running server's
    model list) kept for the points of one sweep, which mostly share their model, dataset and
    engine section: each is asked once."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str], list[str]] = {}

    def answer(self, what: str, section: object, check: Callable[[], list[str]]) -> list[str]:
        key = (what, repr(section))
        if key not in self._answers:
            self._answers[key] = check()
        return list(self._answers[key])


def _model_problems(exp: ExperimentConfig) -> list[str]:
    access = model_problem(exp.model)
    if not access:
        return []
    return [_default_gguf_carried(exp.model) or access]


@functools.lru_cache(maxsize=1)
def _default_model() -> tuple[str, str | None]:
    """(name_or_path, gguf_file) of the default model group (llem/conf/model/<default>.yaml)."""
    from importlib import resources

    import yaml

    path = f"conf/model/{DEFAULT_MODEL_GROUP}.yaml"
    group = yaml.safe_load(resources.files("llem").joinpath(path).read_text(encoding="utf-8"))
    return str(group["name_or_path"]), group.get("gguf_file")


def _default_gguf_carried(m: ModelConfig) -> str | None:
    """Where ``model.name_or_path`` was set over the default model (no ``model=hf``), the
    default's ``model.gguf_file`` is looked for in it: what to add, rather than 'not found'."""
    path, gguf = _default_model()
    if gguf is None or m.gguf_file != gguf or m.name_or_path == path:
        return None
    return (
        f"model.name_or_path={m.name_or_path} is set over the default model "
        f"(model={DEFAULT_MODEL_GROUP}), whose model.gguf_file={gguf} is not there: add model=hf "
        f"to load it on its own (python -m llem model=hf model.name_or_path={m.name_or_path})"
    )


def collect_problems(
    exp: ExperimentConfig, has_cuda: bool, memo: PreflightMemo | None = None
) -> list[str]:
    """Every pre-flight failure for this configuration (empty when all is well); ``memo`` keeps
    the slow checks' answers for the next point of a sweep."""
    return collect_findings(exp, has_cuda, memo)[0]


def collect_findings(
    exp: ExperimentConfig,
    has_cuda: bool,
    memo: PreflightMemo | None = None,
    gpus: GpuOpener = open_gpus,
) -> tuple[list[str], list[str]]:
    """(every pre-flight failure, the checks' warnings) for this configuration; ``gpus`` opens
    the vendor library (a run's own ``RunGpus``)."""
    memo = memo if memo is not None else PreflightMemo()
    problems: list[str] = []
    if exp.device == Device.cuda and not has_cuda:
        problems.append(
            "device=cuda but CUDA is not available here (torch sees no GPU); "
            "use device=auto or device=cpu"
        )
    device = resolve_device(exp.device, has_cuda)
    row = active_engine(exp)
    # a running server is asked what it serves: once per server section of a sweep's plan
    engine_key = (row.name, device, has_cuda, sections(exp, row.name))
    problems.extend(
        memo.answer("engine", engine_key, lambda: engine_preflight(exp, row, device, has_cuda))
    )
    problems.extend(memo.answer("model", exp.model, lambda: _model_problems(exp)))
    q = exp.quantization
    if (q.load_in_4bit or q.load_in_8bit) and importlib.util.find_spec("bitsandbytes") is None:
        which = "load_in_4bit" if q.load_in_4bit else "load_in_8bit"
        problems.append(
            f"quantization.{which}=true needs bitsandbytes (pip install 'llem[quantization]')"
        )
    problems.extend(memo.answer("dataset", exp.dataset, lambda: check_dataset(exp.dataset)))
    backend = create_backend(exp)
    session = MeasurementSession(
        exp.measurement,
        torch_device_indices=None,
        device_type=metered_device(backend, device, exp.measurement, gpus),
        energy_refused=_node_refusal(exp, backend),
        gpus=gpus,
    )
    problems.extend(session.preflight())
    problems.extend(gpu_preflight_problems(exp.gpu, exp.measurement.gpu_indices, gpus))
    problems.extend(footprint_preflight(exp))  # chassis.source=ipmitool, carbon.country
    return problems, list(session.preflight_warnings)


def metered_device(
    backend: Backend[object], device: str, measurement: MeasurementConfig, gpus: GpuOpener
) -> str:
    """The device whose energy the run measures: llem's own ``device``, or where the engine's
    energy is that of GPUs named for it (``Backend.measures_named_gpus``: a server's), whatever
    llem's torch sees, those GPUs as torch calls the vendor's (``gpu_device_type`` of the run's
    library ``gpus``)."""
    if backend.measures_named_gpus(measurement):
        return gpu_device_type(gpus)
    return device


def _node_refusal(exp: ExperimentConfig, backend: Backend[object]) -> str | None:
    """Why this host's meters are not the run's to read (a running server elsewhere, or on GPUs
    not named), asked of the engine where the boundary is the node: the run reads none of it."""
    if exp.measurement.boundary.value != "node":
        return None
    return backend.energy_refusal(exp.measurement)


def engine_preflight(exp: ExperimentConfig, row: Engine, device: str, has_cuda: bool) -> list[str]:
    """The speculative method, where the engine cannot run it; the engine's packages (with its
    install hint), then its own pre-flight (its row's ``preflight`` function, imported only
    here)."""
    problems: list[str] = []
    if refusal := speculative_refusal(exp, row):
        problems.append(refusal)
    for package in sorted(row.packages):
        if importlib.util.find_spec(package) is None:
            hint = install_hint(package)
            problems.append(
                f"backend={row.name} needs the Python package '{package}' (not installed"
                f"{'; ' + hint if hint else ''})"
            )
    if row.preflight:
        module, function = row.preflight.split(":")
        check = getattr(importlib.import_module(module), function)
        problems.extend(check(sections(exp, row.name), device, has_cuda))
    return problems


def preflight(exp: ExperimentConfig, gpus: GpuOpener = open_gpus) -> PreflightReport:
    """Run every check; raise ``PreflightError`` listing all failures, else return warnings."""
    has_cuda = cuda_available()
    problems, warnings = collect_findings(exp, has_cuda, gpus=gpus)
    if problems:
        raise PreflightError(problems, hint="nothing was loaded; fix these and run again")
    device = resolve_device(exp.device, has_cuda)
    q = exp.quantization
    if device == "cpu" and (q.load_in_4bit or q.load_in_8bit):
        warnings.append(
            "bitsandbytes quantization on the CPU works (bitsandbytes >= 0.50) but is slow: "
            "its CPU kernels are no match for the GPU ones, so compare it with CPU runs only"
        )
    if on_gpu(device):
        warnings.extend(_persistence_mode_warning(gpus))
    for w in warnings:
        log.warning(w)
    return PreflightReport(device=device, warnings=warnings)

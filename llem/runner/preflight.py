"""Pre-flight: everything that can be checked before a model is loaded, all failures at once.

``preflight(exp)`` never stops at the first problem: it runs every check and raises one
``PreflightError`` (exit 3) listing them all. Warnings (e.g. GPU persistence mode off) are returned,
never raised. CPU-only is a supported mode: ``device=auto`` falls back to the CPU and energy is then
reported as unavailable.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass, field

from llem.backends import sections
from llem.backends.models import model_problem
from llem.backends.vllm import preflight_problems as vllm_preflight_problems
from llem.config.engines import INSTALL_HINTS, VLLM, backend_package
from llem.config.schema import AttnImplementation, Device, ExperimentConfig
from llem.errors import PreflightError
from llem.measure import MeasurementSession
from llem.measure.nvml import persistence_mode_off
from llem.runner.gpu_settings import gpu_preflight_problems
from llem.runner.prompts import check_dataset

log = logging.getLogger(__name__)


@dataclass
class PreflightReport:
    device: str  # the device the run will use: "cuda" or "cpu"
    warnings: list[str] = field(default_factory=list)


def cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def _persistence_mode_warning() -> list[str]:
    off = persistence_mode_off()
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


def collect_problems(exp: ExperimentConfig, has_cuda: bool) -> list[str]:
    """Every pre-flight failure for this configuration (empty when all is well)."""
    problems: list[str] = []
    if exp.device == Device.cuda and not has_cuda:
        problems.append(
            "device=cuda but CUDA is not available here (torch sees no GPU); "
            "use device=auto or device=cpu"
        )
    device = resolve_device(exp.device, has_cuda)
    backend = exp.backend or "pytorch"
    for package in sorted({backend_package(backend), "torch"}):
        if importlib.util.find_spec(package) is None:
            hint = f"; {INSTALL_HINTS[package]}" if package in INSTALL_HINTS else ""
            problems.append(
                f"backend={backend} needs the Python package '{package}' (not installed{hint})"
            )
    if backend == VLLM:
        problems.extend(vllm_preflight_problems(sections(exp, VLLM), device, has_cuda))
    access = model_problem(exp.model)
    if access:
        problems.append(access)
    q = exp.quantization
    if (q.load_in_4bit or q.load_in_8bit) and importlib.util.find_spec("bitsandbytes") is None:
        which = "load_in_4bit" if q.load_in_4bit else "load_in_8bit"
        problems.append(
            f"quantization.{which}=true needs bitsandbytes (pip install 'llem[quantization]')"
        )
    attn = exp.pytorch.attn_implementation
    if (
        attn == AttnImplementation.flash_attention_2
        and importlib.util.find_spec("flash_attn") is None
    ):
        problems.append(
            "pytorch.attn_implementation=flash_attention_2 needs the flash-attn package"
        )
    if attn == AttnImplementation.flash_attention_3 and (
        importlib.util.find_spec("flash_attn_interface") is None
    ):
        problems.append(
            "pytorch.attn_implementation=flash_attention_3 needs the flash-attn-3 package"
        )
    if attn in (AttnImplementation.flash_attention_2, AttnImplementation.flash_attention_3) and (
        device != "cuda"
    ):
        problems.append(
            f"pytorch.attn_implementation={attn.value} needs a CUDA device (device={device})"
        )
    problems.extend(check_dataset(exp.dataset))
    session = MeasurementSession(exp.measurement, torch_device_indices=None, device_type=device)
    problems.extend(session.preflight())
    problems.extend(gpu_preflight_problems(exp.gpu, exp.measurement.gpu_indices))
    return problems


def preflight(exp: ExperimentConfig) -> PreflightReport:
    """Run every check; raise ``PreflightError`` listing all failures, else return warnings."""
    has_cuda = cuda_available()
    problems = collect_problems(exp, has_cuda)
    if problems:
        raise PreflightError(problems, hint="nothing was loaded; fix these and run again")
    device = resolve_device(exp.device, has_cuda)
    warnings: list[str] = []
    q = exp.quantization
    if device == "cpu" and (q.load_in_4bit or q.load_in_8bit):
        warnings.append(
            "bitsandbytes quantization on the CPU works (bitsandbytes >= 0.50) but is slow: "
            "its CPU kernels are no match for the GPU ones, so compare it with CPU runs only"
        )
    if device == "cuda":
        warnings.extend(_persistence_mode_warning())
    for w in warnings:
        log.warning(w)
    return PreflightReport(device=device, warnings=warnings)

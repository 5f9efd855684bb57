"""Where a run stands on torch's GPUs: the indices it measures (``measured_indices``: the
configured ones, else where the engine puts the model), the ones holding its model
(``model_gpu_indices``, for the memory figures), the GPU context made before the idle baseline
(``init_gpu_context``) and the window edge of a run with nothing of llem's on the GPUs to wait for
(``no_sync``)."""

from __future__ import annotations

from llem.config.schema import ExperimentConfig
from llem.devices.gpu import on_gpu
from llem.vocabulary.engine import Backend
from llem.vocabulary.model import LoadedModel


def no_sync() -> None:
    """A window edge with nothing of llem's on the measured GPUs to wait for."""


def init_gpu_context() -> None:
    """Create the CUDA context now, so the idle baseline sees the GPU as the run will."""
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()


def model_gpu_indices(loaded: LoadedModel) -> list[int]:
    """The torch CUDA indices holding the model (the current device when none is known); none
    when the model is not in this process (vllm's engine: this allocator does not see it)."""
    if not on_gpu(loaded.device) or loaded.engine_process:
        return []
    if loaded.shape is not None and loaded.shape.cuda_devices:
        return list(loaded.shape.cuda_devices)
    import torch

    return [torch.cuda.current_device()]


def measured_indices(
    exp: ExperimentConfig, device: str, backend: Backend[object]
) -> list[int] | None:
    """The torch indices to measure on ``device`` (``preflight.metered_device``):
    measurement.gpu_indices, else where the model goes (a server: the GPUs it names)."""
    if not on_gpu(device):
        return None
    if exp.measurement.gpu_indices is not None:
        return list(exp.measurement.gpu_indices)
    return backend.torch_device_indices()

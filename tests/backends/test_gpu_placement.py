"""The GPUs a multi-GPU run hands its measurement session (issue 31 section 4): exactly those the
model is placed on, no idle GPU more, none fewer."""

from __future__ import annotations

import pytest

from llem.backends.pytorch.placement import placed_indices
from llem.backends.server.backend import launched_gpus


@pytest.mark.parametrize(
    "device_map, max_memory, expected",
    [
        (None, None, [2]),  # the current device (torch's, here 2)
        ("cuda", None, [2]),
        ("cuda:1", None, [1]),  # one named GPU, not every visible one
        ("3", None, [3]),
        ("auto", None, [0, 1, 2, 3]),  # accelerate spreads over every visible GPU
        ("balanced", None, [0, 1, 2, 3]),
        ("auto", {0: "20GiB", 1: "20GiB", "cpu": "64GiB"}, [0, 1]),  # only the GPUs it names
        ("sequential", {"cuda:3": "10GiB", "1": "10GiB"}, [1, 3]),
        ("auto", {"cpu": "64GiB"}, [0, 1, 2, 3]),
        ("auto", {7: "10GiB", 0: "10GiB"}, [0]),  # an index beyond torch's count is not a GPU
    ],
)
def test_pytorch_device_map_gives_the_gpus_the_model_is_on(device_map, max_memory, expected):
    assert placed_indices(device_map, max_memory, visible=4, current=2) == expected


@pytest.mark.parametrize(
    "args, expected",
    [
        ({}, [0]),
        ({"tensor_parallel_size": 2}, [0, 1]),
        ({"tensor_parallel_size": 2, "pipeline_parallel_size": 2}, [0, 1, 2, 3]),
        ({"tensor-parallel-size": 2, "pipeline-parallel-size": 3}, list(range(6))),
        ({"pipeline_parallel_size": 2}, [0, 1]),
    ],
)
def test_a_launched_vllm_server_measures_tensor_times_pipeline_gpus(args, expected):
    assert launched_gpus(args) == expected


def test_the_pytorch_backend_hands_the_run_the_placed_gpus(monkeypatch):
    """What the runner asks (``Backend.torch_device_indices``), with torch seeing 4 GPUs."""
    import torch

    from llem.backends import create_backend
    from llem.config.schema import ExperimentConfig

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    exp = ExperimentConfig(backend="pytorch")
    exp.pytorch.device_map = "cuda:1"
    assert create_backend(exp).torch_device_indices() == [1]  # before: [0, 1, 2, 3]
    exp.pytorch.device_map = "auto"
    exp.pytorch.max_memory = {0: "20GiB", 2: "20GiB"}
    assert create_backend(exp).torch_device_indices() == [0, 2]  # before: [0, 1, 2, 3]


def test_the_server_backend_hands_the_run_every_pipeline_stage():
    from llem.backends import create_backend
    from llem.config.schema import ExperimentConfig

    exp = ExperimentConfig(backend="server")
    exp.server.args = {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}
    assert create_backend(exp).torch_device_indices() == [0, 1, 2, 3]  # before: [0, 1]

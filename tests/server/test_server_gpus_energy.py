"""A server's GPUs are measured where llem's own torch sees no CUDA (a CPU-only install on the
server's GPU host): the server backend, not llem's torch device, decides which GPUs the run
measures (``Backend.measures_named_gpus``). The NVML double plants three GPUs at three constant
powers; llem's torch reports no CUDA, so ``device=auto`` resolves to the CPU. Without its GPUs
named, a running server's energy is null with the reason, never another GPU's."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from llem.devices import gpus as vendors
from llem.devices.nvidia import Nvml, init_nvml
from llem.measure import MeasurementSession
from llem.measure import devices as measure_devices
from llem.measure.sampler import RealClock
from llem.runner import Runner
from llem.runner import preflight as runner_preflight
from llem.testing.cli import REPO, compose_tiny
from llem.testing.fake_pynvml import Constant, FakeGpu, FakeNvml
from tests.server.fake_openai import MODEL, Plan
from tests.server.fake_thread import fake_in_thread

GB = 2**30
#: the planted GPUs' constant draw (W): GPU-a is one the server does not run on
WATTS = {"GPU-a": 70.0, "GPU-b": 200.0, "GPU-c": 300.0}

#: a short measured run on llem's own device=auto (no CUDA here: the CPU)
RUN = (
    "+backend=server",
    f"server.model={MODEL}",
    "device=auto",
    "measurement.energy=auto",
    "measurement.idle_baseline_s=0",
    "measurement.min_window_s=0",
    "measurement.min_valid_window_s=0",
    "measurement.warmup=0",
    "traffic.n_requests=4",
)


@pytest.fixture
def nvml_without_cuda(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """``plant(pid)``: NVML sees the planted GPUs (``pid``'s compute process on GPU-b and GPU-c,
    where given); llem's torch sees no CUDA."""
    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(measure_devices, "torch_device_uuids", lambda indices: None)
    monkeypatch.setattr(runner_preflight, "cuda_available", lambda: False)

    def plant(pid: int | None = None) -> FakeNvml:
        held = {"GPU-b", "GPU-c"} if pid is not None else set()
        gpus = [
            FakeGpu(u, power=Constant(w), processes=[(pid, GB)] if u in held else [])
            for u, w in WATTS.items()
        ]
        fake = FakeNvml(gpus, RealClock())  # energy grows with real time
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return plant


def _run(model_dir: Path, run_dir: Path, *overrides: str) -> dict[str, Any]:
    return Runner().run(compose_tiny(model_dir, *RUN, *overrides), run_dir).to_json()


def _measured_at_planted_power(result: dict[str, Any], named: list[str]) -> None:
    """Exactly the ``named`` GPUs are measured, each at its planted draw, their joules summed."""
    energy = result["energy"]
    assert energy["unavailable_reason"] is None, energy["unavailable_reason"]
    assert energy["source"] == "nvml_counter"
    assert [g["uuid"] for g in result["hardware"]["gpus"]] == named
    assert sorted(energy["per_device_j"]) == named  # never GPU-a's (nor llem's own device's)
    for uuid in named:
        assert energy["per_device_avg_power_w"][uuid] == pytest.approx(WATTS[uuid], rel=0.01)
    assert energy["total_j"] == pytest.approx(sum(energy["per_device_j"].values()))
    assert energy["total_j"] > 0
    assert result["boundary"]["gpus"] == named


def test_a_running_servers_named_gpus_are_measured_without_cuda_in_llem(
    nvml_without_cuda, tiny_model_dir, tmp_path
):
    """server.gpus=[1,2] of the three GPUs NVML sees: GPU-b and GPU-c are measured at their
    planted draw (before: nothing, 'the run is on device=cpu, not on a GPU', while the result
    said device cuda), GPU-a never; the server's checks pass on them."""
    server = os.getppid()  # the server's root, named by server.pids (not llem's descendant)
    nvml_without_cuda(server)
    with fake_in_thread(Plan()) as url:
        result = _run_on_gpus_1_2(tiny_model_dir, tmp_path, url, server)
    assert result["status"] == "ok"
    _measured_at_planted_power(result, ["GPU-b", "GPU-c"])
    assert result["device"] == "cuda" and "device" not in result["null_reasons"]
    validity = result["validity"]
    for check in ("server_gpus", "server_processes", "other_processes"):
        assert validity["checks"][check] == "passed", (check, validity)
    assert validity["energy_valid"] is True, validity["problems"]
    assert result["server"]["gpus_used"] == ["GPU-b", "GPU-c"]
    (includes,) = result["boundary"]["includes"]
    assert includes.startswith("the whole draw of GPU(s) GPU-b, GPU-c over the window")


def test_preflight_takes_a_servers_named_gpus_as_measured_without_cuda(
    nvml_without_cuda, tiny_model_dir
):
    """measurement.energy=nvml (or measurement.gpu_indices) with a server's GPUs named passes
    pre-flight on a llem without CUDA (before: 'needs a CUDA device but the run is on
    device=cpu'); an engine in llem's own process is still refused."""
    from llem.config.schema import EnergySource
    from llem.runner.preflight import collect_problems

    nvml_without_cuda()
    with fake_in_thread(Plan()) as url:
        for named in ("server.gpus=[1]", "measurement.gpu_indices=[1]"):
            exp = compose_tiny(tiny_model_dir, *RUN, f"server.url={url}", named)
            exp.measurement.energy = EnergySource.nvml
            assert collect_problems(exp, has_cuda=False) == [], named
    own = compose_tiny(tiny_model_dir, "device=auto", "measurement.energy=nvml")
    assert "measurement.energy=nvml needs a CUDA device but the run is on device=cpu" in (
        collect_problems(own, has_cuda=False)
    )


def test_a_running_server_with_no_gpus_named_measures_none_and_says_why(
    nvml_without_cuda, tiny_model_dir, tmp_path
):
    """No server.gpus while NVML sees three GPUs: none is measured (neither all visible GPUs nor
    GPU 0), the energy is null with the reason and its remedy, the device not stated, and the
    boundary says the server's GPUs are outside it."""
    nvml_without_cuda()
    with fake_in_thread(Plan()) as url:
        result = _run(tiny_model_dir, tmp_path / "run", f"server.url={url}")
    assert result["status"] == "ok"
    energy = result["energy"]
    assert energy["total_j"] is None and energy["per_device_j"] == {}
    assert result["hardware"]["gpus"] == [] and result["boundary"]["gpus"] == []
    reason = energy["unavailable_reason"]
    assert reason.startswith(f"server.url={url} is a server llem did not start")
    assert "set server.gpus to the GPU indices it runs on" in reason
    assert result["device"] is None
    assert "server.gpus names its GPUs" in result["null_reasons"]["device"]
    assert result["validity"]["energy_valid"] is None
    assert result["validity"]["checks"]["server_gpus"] == "not checked"
    assert result["boundary"]["includes"] == []
    (outside,) = [o for o in result["boundary"]["outside"] if o.startswith("the server at")]
    assert "its GPUs were not measured (server.url=" in outside


@pytest.mark.slow
def test_a_server_command_on_named_gpus_is_measured_without_cuda_in_llem(
    nvml_without_cuda, tiny_model_dir, tmp_path
):
    """server.launch=command with server.gpus=[1]: GPU-b is measured at its planted draw and the
    result's device is cuda, not llem's cpu (before: nothing measured, device cpu)."""
    nvml_without_cuda()
    command = f"env PYTHONPATH={REPO} {sys.executable} -m tests.server.fake_openai_cli {{port}}"
    result = _run(
        tiny_model_dir,
        tmp_path / "run",
        "server.launch=command",
        f"server.command='{command}'",
        "server.model=fake-model",
        "server.gpus=[1]",
    )
    assert result["status"] == "ok", result.get("error")
    _measured_at_planted_power(result, ["GPU-b"])
    assert result["device"] == "cuda"
    # the launched server holds no planted GPU: measured, said as a condition, not a problem
    assert result["validity"]["checks"]["server_gpus"] == "condition"


def test_the_named_gpus_follow_cuda_visible_devices_without_cuda_in_llem(
    nvml_without_cuda, tiny_model_dir, tmp_path, monkeypatch
):
    """server.gpus are indices as this process sees them: under CUDA_VISIBLE_DEVICES=2,1,
    server.gpus=[0] is GPU-c (NVML's third), mapped by the devices layer without torch."""
    nvml_without_cuda()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    with fake_in_thread(Plan()) as url:
        result = _run(tiny_model_dir, tmp_path / "run", f"server.url={url}", "server.gpus=[0]")
    _measured_at_planted_power(result, ["GPU-c"])


def test_a_llem_on_the_cpu_never_synchronises_the_servers_gpus(
    nvml_without_cuda, tiny_model_dir, tmp_path, monkeypatch
):
    """device=cpu where llem's torch has CUDA: the server's named GPUs are measured, and llem
    never calls torch.cuda.synchronize on them (which would open a CUDA context of llem's on
    each); the window's edges wait for nothing of llem's."""
    import torch

    synced: list[object] = []
    nvml_without_cuda()
    monkeypatch.setattr(runner_preflight, "cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda i=None: synced.append(i))
    with fake_in_thread(Plan()) as url:
        result = _run(
            tiny_model_dir, tmp_path / "run", f"server.url={url}", "server.gpus=[1]", "device=cpu"
        )
    _measured_at_planted_power(result, ["GPU-b"])
    assert synced == []


def _run_on_gpus_1_2(model: Path, tmp_path: Path, url: str, server: int) -> dict[str, Any]:
    """A run against the running server at ``url`` whose GPUs are named 1 and 2 and whose root
    process is ``server``."""
    return _run(
        model, tmp_path / "run", f"server.url={url}", "server.gpus=[1,2]", f"server.pids=[{server}]"
    )


class _HpuNvml(Nvml):
    """A toy vendor: the NVML double's GPUs, which its torch calls ``hpu``, not cuda."""

    torch_device_type = "hpu"


def test_a_servers_named_gpus_are_measured_on_the_vendors_device_type(
    nvml_without_cuda, tiny_model_dir, tmp_path, monkeypatch
):
    """With a vendor whose torch device is ``hpu``, pre-flight and the run measure a running
    server's named GPUs on ``hpu`` (the run's library's ``torch_device_type``), and the result
    says so (before: the server engine named them ``cuda``, whatever the vendor)."""
    server = os.getppid()
    fake = nvml_without_cuda(server)
    monkeypatch.setattr(vendors, "VENDORS", [("toy", lambda: _HpuNvml(init_nvml(fake).module))])
    opened: list[str] = []

    class Seen(MeasurementSession):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            opened.append(self.device_type)

    monkeypatch.setattr(runner_preflight, "MeasurementSession", Seen)
    monkeypatch.setattr(importlib.import_module("llem.runner.runner"), "MeasurementSession", Seen)
    with fake_in_thread(Plan()) as url:
        result = _run_on_gpus_1_2(tiny_model_dir, tmp_path, url, server)
    assert result["status"] == "ok", result.get("error")
    assert opened == ["hpu", "hpu"]  # pre-flight's session, then the run's
    _measured_at_planted_power(result, ["GPU-b", "GPU-c"])
    assert result["device"] == "hpu"

"""Pre-flight: every check runs and every failure is reported at once; warnings never fail."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from llem.config.schema import Device, ExperimentConfig
from llem.errors import PreflightError
from llem.runner.preflight import (
    _persistence_mode_warning,
    collect_problems,
    preflight,
    resolve_device,
)


def _exp(path: str) -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.model.name_or_path = path
    exp.backend = "pytorch"
    return exp


def test_auto_falls_back_to_cpu_without_cuda():
    assert resolve_device(Device.auto, has_cuda=False) == "cpu"
    assert resolve_device(Device.auto, has_cuda=True) == "cuda"
    assert resolve_device(Device.cpu, has_cuda=True) == "cpu"


def test_cpu_only_is_supported_not_a_failure(tiny_model_dir):
    report = preflight(_exp(str(tiny_model_dir)))
    assert report.device == "cpu" and report.warnings == []


def test_failures_are_collected_together(tmp_path):
    exp = _exp(str(tmp_path / "no-model"))
    exp.device = Device.cuda
    exp.quantization.load_in_4bit = True
    problems = collect_problems(exp, has_cuda=False)
    text = "\n".join(problems)
    assert "device=cuda" in text and "no-model" in text
    if importlib.util.find_spec("bitsandbytes") is None:
        assert "bitsandbytes" in text
    with pytest.raises(PreflightError) as err:
        preflight(exp)
    assert len(err.value.problems) >= 2


def test_gguf_file_missing_lists_what_is_there(tmp_path):
    (tmp_path / "other.gguf").write_bytes(b"")
    exp = _exp(str(tmp_path))
    exp.model.gguf_file = "model.gguf"
    text = "\n".join(collect_problems(exp, has_cuda=False))
    assert "model.gguf_file=model.gguf" in text and "other.gguf" in text


def test_pkg_reference_to_a_missing_package(tmp_path):
    text = "\n".join(collect_problems(_exp("pkg:no_such_package_xyz"), has_cuda=False))
    assert "no_such_package_xyz" in text and "not installed" in text


def test_hub_id_missing_from_cache_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    text = "\n".join(collect_problems(_exp("someorg/somemodel"), has_cuda=False))
    assert "someorg/somemodel" in text and "cache" in text


def test_persistence_mode_off_is_a_warning(monkeypatch):
    fake = types.ModuleType("pynvml")
    fake.nvmlInit = lambda: None
    fake.nvmlShutdown = lambda: None
    fake.nvmlDeviceGetCount = lambda: 2
    fake.nvmlDeviceGetHandleByIndex = lambda i: i
    fake.nvmlDeviceGetPersistenceMode = lambda h: 0 if h == 1 else 1
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    warnings = _persistence_mode_warning()
    assert len(warnings) == 1 and "device(s) 1" in warnings[0]


def _online_with_an_empty_cache(monkeypatch, tmp_path) -> None:
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


def test_hub_id_missing_from_cache_online_without_a_hub_fails_preflight_at_once(
    monkeypatch, tmp_path
):
    """No network (the hub's address is a closed local port): exit 3 in seconds, with the hint."""
    import socket
    import time

    _online_with_an_empty_cache(monkeypatch, tmp_path)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    with pytest.raises(PreflightError) as err:
        preflight(_exp("no-such-org-xyz/no-such-model"))
    assert time.monotonic() - start < 10
    assert err.value.exit_code == 3
    text = "\n".join(err.value.problems)
    assert "no-such-org-xyz/no-such-model is not in the local Hugging Face cache" in text
    assert "could not be reached" in text and "is it downloaded?" in text
    assert "HF_HUB_OFFLINE=1" in text


def test_hub_id_missing_from_cache_online_asks_the_hub_once(monkeypatch, tmp_path):
    """A hub that says the model exists lets from_pretrained download it; one that does not
    know it is a pre-flight failure (a fake hub: nothing leaves the machine)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    _online_with_an_empty_cache(monkeypatch, tmp_path)
    asked: list[str] = []

    def model_info(self, repo_id, **kwargs):
        asked.append(repo_id)
        if repo_id == "org/exists":
            return types.SimpleNamespace(siblings=[types.SimpleNamespace(rfilename="m.gguf")])
        not_found = RepositoryNotFoundError.__new__(RepositoryNotFoundError)  # as the hub's 404
        Exception.__init__(not_found, f"404: {repo_id}")
        raise not_found

    monkeypatch.setattr(HfApi, "model_info", model_info)
    assert collect_problems(_exp("org/exists"), has_cuda=False) == []
    exp = _exp("org/exists")
    exp.model.gguf_file = "other.gguf"
    assert "has no other.gguf" in "\n".join(collect_problems(exp, has_cuda=False))
    text = "\n".join(collect_problems(_exp("org/nope"), has_cuda=False))
    assert "org/nope is not in the local Hugging Face cache" in text and "no such model" in text
    assert asked == ["org/exists", "org/exists", "org/nope"]


@pytest.mark.parametrize(
    "env",
    [{"HF_HUB_CACHE": "a/hub"}, {"HF_HOME": "b"}, {"XDG_CACHE_HOME": "c"}, {}],
)
def test_the_hub_cache_is_where_huggingface_hub_puts_it(env, monkeypatch, tmp_path):
    """Read now from the environment, the same place huggingface_hub computes at its import."""
    import os
    import subprocess

    from llem.backends.models import hub_cache_dir

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    code = "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)"
    theirs = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True
    ).stdout.strip()
    assert hub_cache_dir() == Path(theirs)


def test_a_node_whose_meters_the_engine_refuses_is_refused_and_only_a_node_asks(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running server elsewhere (or on GPUs not named) leaves this host's meters unread: the
    engine's reason names every part of a node; a GPU boundary never asks the engine."""
    import llem.runner.preflight as preflight_module
    from llem.config.schema import BoundaryKind, EnergySource

    asked: list[str] = []

    class Refusing:
        def measures_named_gpus(self, measurement: object) -> bool:
            return False

        def energy_refusal(self, measurement: object) -> str:
            asked.append("asked")
            return "planted: the server runs on another host"

    monkeypatch.setattr(preflight_module, "create_backend", lambda exp: Refusing())
    exp = _exp(str(tiny_model_dir))
    exp.measurement.energy = EnergySource.auto
    assert collect_problems(exp, has_cuda=False) == [] and asked == []
    exp.measurement.boundary = BoundaryKind.node
    (problem,) = collect_problems(exp, has_cuda=False)
    assert asked == ["asked"]
    assert problem.startswith(
        "measurement.boundary=node: no part of the node can be read here (GPUs, CPU packages and "
        "DRAM: planted: the server runs on another host), so the run would end with no energy"
    )


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the device nodes are Linux's")
def test_a_host_without_a_gpu_driver_is_not_asked_through_torch(tmp_path: Path):
    """Without any GPU driver's device node, CUDA cannot be available and torch is not imported to
    ask (a dry run took 4.3 s, 2 of them torch's import); with one, torch is asked."""
    import subprocess

    node = tmp_path / "nvidiactl"
    node.write_text("")
    code = (
        "import sys\n"
        "from llem.runner.preflight import cuda_available\n"
        "print(cuda_available(nodes=(sys.argv[1],)), 'torch' in sys.modules)\n"
    )
    runs = {
        where: subprocess.run(
            [sys.executable, "-c", code, where], capture_output=True, text=True, check=True
        ).stdout.split()
        for where in (str(tmp_path / "absent"), str(node))
    }
    assert runs[str(tmp_path / "absent")] == ["False", "False"]
    assert runs[str(node)] == ["False", "True"]  # asked: this machine's torch has no CUDA

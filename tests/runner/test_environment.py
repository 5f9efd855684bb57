from __future__ import annotations

import json
import os
import stat
import sys
import time
import types
from pathlib import Path

import pytest

import llem
from llem.runner import environment
from llem.runner.environment import PACKAGES, capture_environment, write_environment


class FakeNVMLError(Exception):
    pass


def _fake_pynvml(gpus: list[tuple[str, str, int]], driver: bytes | str = "550.54.15"):
    """A stand-in for the pynvml module: ``gpus`` is [(name, uuid, total bytes)]."""
    fake = types.ModuleType("pynvml")
    calls: list[str] = []

    def init() -> None:
        calls.append("init")

    def shutdown() -> None:
        calls.append("shutdown")

    def handle(index: int) -> int:
        if not 0 <= index < len(gpus):
            raise FakeNVMLError("Invalid Argument")
        return index

    fake.nvmlInit = init
    fake.nvmlShutdown = shutdown
    fake.nvmlSystemGetDriverVersion = lambda: driver
    fake.nvmlDeviceGetCount = lambda: len(gpus)
    fake.nvmlDeviceGetHandleByIndex = handle
    fake.nvmlDeviceGetName = lambda h: gpus[h][0]
    fake.nvmlDeviceGetUUID = lambda h: gpus[h][1]
    fake.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=gpus[h][2], used=0)
    fake.calls = calls
    return fake


@pytest.fixture
def no_cuda(monkeypatch, tmp_path: Path) -> Path:
    """torch reports no CUDA build, no CUDA home, nothing on PATH: the fallback chain runs dry."""
    monkeypatch.setattr(environment, "_torch_cuda_version", lambda: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    return tmp_path


def _cuda_home(root: Path, txt: str | None = None, js: dict | None = None) -> Path:
    home = root / "cuda"
    home.mkdir(exist_ok=True)
    if txt is not None:
        (home / "version.txt").write_text(txt)
    if js is not None:
        (home / "version.json").write_text(json.dumps(js))
    return home


def _fake_nvcc(bin_dir: Path, output: str, monkeypatch) -> None:
    bin_dir.mkdir(exist_ok=True)
    nvcc = bin_dir / "nvcc"
    # only shell builtins: PATH holds nothing but this directory
    echoes = "".join(f"echo '{line}'\n" for line in output.splitlines())
    nvcc.write_text("#!/bin/sh\n" + echoes)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", str(bin_dir))


# --- shape of the snapshot -----------------------------------------------------------------------


def test_snapshot_has_every_key_with_the_right_types() -> None:
    env = capture_environment()
    assert env["llem"]["version"] == llem.__version__
    assert set(env["python"]) == {"version", "implementation", "executable"}
    assert env["python"]["executable"] == sys.executable
    assert set(env["packages"]) == set(PACKAGES)
    assert env["packages"]["torch"]  # installed here
    assert all(v is None or isinstance(v, str) for v in env["packages"].values())
    assert set(env["torch"]) == {"version", "cuda_available", "cuda_device_count"}
    assert isinstance(env["torch"]["cuda_available"], bool)
    assert isinstance(env["torch"]["cuda_device_count"], int)
    assert set(env["cuda"]) == {"version", "source"}
    assert env["cuda"]["source"] in {"torch", "version.txt", "version.json", "nvcc", None}
    assert isinstance(env["gpus"], list)
    assert "driver_version" in env and "gpus_unavailable_reason" in env
    assert "cuda_visible_devices" in env
    cpu = env["cpu"]
    assert cpu["logical_cores"] == os.cpu_count()
    assert cpu["physical_cores"] is None or 1 <= cpu["physical_cores"] <= cpu["logical_cores"]
    assert isinstance(env["memory_total_mb"], int) and env["memory_total_mb"] > 0
    assert set(env["os"]) == {"platform", "system", "release"}
    assert isinstance(env["hostname"], str)
    assert env["captured_at"].endswith("+00:00")
    assert isinstance(env["unavailable"], dict)
    json.dumps(env)  # JSON-ready as it is


def test_pip_freeze_lists_installed_distributions_sorted() -> None:
    freeze = capture_environment()["pip_freeze"]
    assert freeze == sorted(freeze, key=str.lower)
    assert len(freeze) == len({f.split("==")[0].lower() for f in freeze})
    names = {f.split("==")[0].lower() for f in freeze}
    assert {"torch", "pytest", "llem"} <= names
    assert all("==" in f for f in freeze)


def test_cuda_visible_devices_is_recorded(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert capture_environment()["cuda_visible_devices"] == "1,0"


def test_capture_is_fast_once_torch_is_imported() -> None:
    import torch  # noqa: F401  # the run imports torch anyway; its import cost is paid once

    start = time.perf_counter()
    capture_environment()
    assert time.perf_counter() - start < 1.0


# --- GPUs through NVML ---------------------------------------------------------------------------


def test_missing_nvml_gives_no_gpus_and_a_reason(monkeypatch) -> None:
    missing = types.ModuleType("pynvml")

    def init() -> None:
        raise FakeNVMLError("NVML Shared Library Not Found")

    missing.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", missing)
    env = capture_environment()
    assert env["gpus"] == []
    assert env["driver_version"] is None
    assert "NVML Shared Library Not Found" in env["gpus_unavailable_reason"]
    assert env["unavailable"]["gpus"] == env["gpus_unavailable_reason"]
    assert "driver_version" in env["unavailable"]


def test_real_pynvml_without_the_library_degrades() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("NVML is present on this machine")
    env = capture_environment()
    assert env["gpus"] == []
    assert env["gpus_unavailable_reason"]


def test_fake_nvml_with_two_gpus(monkeypatch) -> None:
    fake = _fake_pynvml(
        [
            ("NVIDIA H100 80GB HBM3", "GPU-aaaa", 81559 * 2**20),
            (b"NVIDIA A100-SXM4-40GB", b"GPU-bbbb", 40960 * 2**20),  # older bindings: bytes
        ],
        driver=b"550.54.15",
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    env = capture_environment()
    assert env["driver_version"] == "550.54.15"
    assert env["gpus"] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa", "memory_total_mb": 81559},
        {"index": 1, "name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-bbbb", "memory_total_mb": 40960},
    ]
    assert env["gpus_unavailable_reason"] is None
    assert "gpus" not in env["unavailable"] and "driver_version" not in env["unavailable"]
    assert fake.calls == ["init", "shutdown"]


def test_one_broken_gpu_keeps_the_others(monkeypatch) -> None:
    fake = _fake_pynvml([("GPU zero", "GPU-0", 2**30), ("GPU one", "GPU-1", 2**30)])

    def uuid(h: int) -> str:
        if h == 1:
            raise FakeNVMLError("GPU is lost")
        return "GPU-0"

    def driver() -> str:
        raise FakeNVMLError("Not Supported")

    fake.nvmlDeviceGetUUID = uuid
    fake.nvmlSystemGetDriverVersion = driver
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    env = capture_environment()
    assert env["gpus"][0]["uuid"] == "GPU-0"
    assert env["gpus"][1]["uuid"] is None
    assert "GPU is lost" in env["unavailable"]["gpus.1"]
    assert env["driver_version"] is None
    assert "Not Supported" in env["unavailable"]["driver_version"]
    assert fake.calls == ["init", "shutdown"]


# --- CUDA version fallback chain -----------------------------------------------------------------


def test_cuda_from_torch_comes_first(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(environment, "_torch_cuda_version", lambda: "12.1")
    home = _cuda_home(tmp_path, txt="CUDA Version 12.4.1")
    assert capture_environment(cuda_home=home)["cuda"] == {"version": "12.1", "source": "torch"}


def test_cuda_from_version_txt(no_cuda: Path) -> None:
    home = _cuda_home(no_cuda, txt="CUDA Version 12.4.1\n")
    env = capture_environment(cuda_home=home)
    assert env["cuda"] == {"version": "12.4.1", "source": "version.txt"}
    assert "cuda" not in env["unavailable"]


def test_cuda_from_version_json(no_cuda: Path) -> None:
    home = _cuda_home(no_cuda, js={"cuda": {"name": "CUDA SDK", "version": "12.6.2"}})
    assert capture_environment(cuda_home=home)["cuda"] == {
        "version": "12.6.2",
        "source": "version.json",
    }


def test_cuda_version_txt_wins_over_json_and_bad_txt_falls_through(no_cuda: Path) -> None:
    home = _cuda_home(
        no_cuda, txt="CUDA Version 12.4.1", js={"cuda": {"name": "CUDA SDK", "version": "12.4.0"}}
    )
    assert capture_environment(cuda_home=home)["cuda"]["source"] == "version.txt"
    (home / "version.txt").write_text("garbage")
    assert capture_environment(cuda_home=home)["cuda"] == {
        "version": "12.4.0",
        "source": "version.json",
    }


@pytest.mark.parametrize("variable", ["CUDA_HOME", "CUDA_PATH"])
def test_cuda_home_from_environment_variable(no_cuda: Path, monkeypatch, variable: str) -> None:
    home = _cuda_home(no_cuda, txt="CUDA Version 11.8.0")
    monkeypatch.setenv(variable, str(home))
    assert capture_environment()["cuda"] == {"version": "11.8.0", "source": "version.txt"}


def test_cuda_from_nvcc_on_path(no_cuda: Path, monkeypatch) -> None:
    _fake_nvcc(
        no_cuda / "bin",
        "nvcc: NVIDIA (R) Cuda compiler driver\n"
        "Cuda compilation tools, release 12.4, V12.4.131\n"
        "Build cuda_12.4.r12.4/compiler.34097967_0",
        monkeypatch,
    )
    empty_home = _cuda_home(no_cuda)
    env = capture_environment(cuda_home=empty_home)
    assert env["cuda"] == {"version": "12.4.131", "source": "nvcc"}


def test_no_cuda_anywhere_gives_null_and_a_reason(no_cuda: Path) -> None:
    env = capture_environment(cuda_home=_cuda_home(no_cuda))
    assert env["cuda"] == {"version": None, "source": None}
    assert "no nvcc" in env["unavailable"]["cuda"]


# --- guarded probes ------------------------------------------------------------------------------


def test_a_failing_probe_gives_null_and_a_reason(monkeypatch) -> None:
    def boom() -> dict:
        raise RuntimeError("cpuinfo exploded")

    monkeypatch.setattr(environment, "_cpu", boom)
    env = capture_environment()
    assert env["cpu"] is None
    assert env["unavailable"]["cpu"] == "RuntimeError: cpuinfo exploded"
    assert env["python"]["version"]  # the other probes still ran


def test_missing_torch_is_reported_not_raised(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    env = capture_environment()
    assert env["torch"] is None
    assert "torch cannot be imported" in env["unavailable"]["torch"]


# --- writing -------------------------------------------------------------------------------------


def test_write_environment_is_atomic_json(tmp_path: Path) -> None:
    target = tmp_path / "run" / "environment.json"
    env = {"python": {"version": "3.11"}, "path": Path("/x")}
    assert write_environment(target, env) == target
    assert json.loads(target.read_text()) == {"python": {"version": "3.11"}, "path": "/x"}
    assert target.read_text().startswith('{\n  "python"')  # indent 2
    assert sorted(p.name for p in target.parent.iterdir()) == ["environment.json"]


def test_write_environment_replaces_and_leaves_no_tmp_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "environment.json"
    write_environment(target, {"a": 1})
    write_environment(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}

    class Unserialisable:
        def __str__(self) -> str:
            raise RuntimeError("cannot render")

    with pytest.raises(RuntimeError):
        write_environment(target, {"a": Unserialisable()})
    assert json.loads(target.read_text()) == {"a": 2}  # the old file survives intact
    assert [p.name for p in tmp_path.iterdir()] == ["environment.json"]


def test_write_environment_captures_when_no_env_given(tmp_path: Path) -> None:
    target = write_environment(tmp_path / "environment.json")
    data = json.loads(target.read_text())
    assert data["llem"]["version"] == llem.__version__
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)


def test_installed_distributions_are_read_once_per_process(monkeypatch) -> None:
    """The points of an in-process sweep do not each scan every distribution's metadata."""
    calls = []
    real = environment._pip_freeze
    monkeypatch.setattr(environment, "_INSTALLED", {})
    monkeypatch.setattr(environment, "_pip_freeze", lambda: calls.append(1) or real())
    first, second = capture_environment(), capture_environment()
    assert len(calls) == 1
    assert first["pip_freeze"] == second["pip_freeze"] and first["pip_freeze"]
    first["pip_freeze"].append("mutated==1")  # each snapshot holds its own copy
    assert "mutated==1" not in capture_environment()["pip_freeze"]


def test_a_runner_captures_the_environment_once_per_process(monkeypatch) -> None:
    calls = []

    def capture(**kw):  # gpus=: the run's library
        calls.append(1)
        return {"captured_at": "then", "gpus": [], "n": len(calls)}

    monkeypatch.setattr(environment, "capture_environment", capture)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    cache = environment.EnvironmentCache()
    first, second = cache.snapshot(), cache.snapshot()
    assert len(calls) == 1 and second["n"] == 1
    assert second["captured_at"] != "then"  # each copy carries the time it was asked for
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # other devices: captured again
    assert cache.snapshot()["n"] == 2 and first["n"] == 1

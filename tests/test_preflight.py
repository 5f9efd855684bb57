"""Pre-flight: every check runs and every failure is reported at once; warnings never fail."""

from __future__ import annotations

import importlib.util
import sys
import types

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

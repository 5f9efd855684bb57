from __future__ import annotations

import os
from pathlib import Path

import pytest

from llem.testing.tinymodel import build_tiny_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _own_llem_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test has its own llem cache directory (idle baselines, GGUF copies), never ~/.cache."""
    monkeypatch.setenv("LLEM_CACHE_DIR", str(tmp_path / "llem-cache"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama model + BPE tokenizer on disk (about 0.5 MB)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


def _gpu_skip_reason() -> str | None:
    try:
        import torch

        if not torch.cuda.is_available():
            return "needs a CUDA GPU (torch.cuda.is_available() is False on this machine)"
    except Exception as exc:  # pragma: no cover
        return f"torch unavailable: {exc}"
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as exc:
        return f"needs NVML ({type(exc).__name__})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _gpu_skip_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))

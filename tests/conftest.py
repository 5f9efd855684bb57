from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from llem.testing.tinymodel import build_tiny_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: the CPUs a pytest-xdist worker could use before it was given its own (comma-separated)
ALL_CPUS_ENV = "LLEM_TESTS_ALL_CPUS"


def _worker_cpus() -> tuple[list[int], list[int]] | None:
    """Under pytest-xdist: (every CPU this process may use, this worker's share of them), the
    CPUs dealt out in turn to the workers; None outside xdist, or with fewer CPUs than workers."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_getaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < count:
        return None
    return cpus, cpus[int(worker[2:]) % count :: count]


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest-xdist worker runs on CPUs of its own, and so does every process it starts
    (llem runs, engines and servers inherit the affinity). llem gives torch one thread per usable
    CPU; two workers each giving torch every CPU of the machine put twice as many spinning OpenMP
    threads on its cores as there are cores, which ran the same work about 6x slower (two
    processes of 2 threads each on this 2-core machine: 479 s; of 1 thread each: 77 s). A test
    marked ``all_cpus`` (it counts the CPUs llem uses) gets them all back while it runs."""
    config.addinivalue_line("markers", "all_cpus: runs on every CPU, not its xdist worker's own")
    config.addinivalue_line("markers", "own_llem_cache: shares no part of llem's cache")
    split = _worker_cpus()
    if split is not None:
        every, mine = split
        os.environ[ALL_CPUS_ENV] = ",".join(map(str, every))
        os.sched_setaffinity(0, mine)


@pytest.fixture(autouse=True)
def _all_cpus_when_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    every = os.environ.get(ALL_CPUS_ENV)
    if every is None or request.node.get_closest_marker("all_cpus") is None:
        yield
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, [int(c) for c in every.split(",")])
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


#: the parts of llem's cache that every test of a run shares: what takes long to make and what no
#: test changes (the default model's converted GGUF copy, about 75 CPU-s to make; lm-eval's task
#: index, 30-40 s); a test marked ``own_llem_cache`` (it tests those caches) shares nothing
SHARED_CACHE = ("gguf", "lm_eval")


@pytest.fixture(scope="session")
def _shared_llem_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's shared part of llem's cache: one for all pytest-xdist workers of a run (each
    worker's base directory lies below the run's), made anew by each run. Both caches write a
    copy under a name of their own and rename it into place, so workers never read a half-made
    one."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = root / "llem-shared-cache"
    for name in SHARED_CACHE:
        (shared / name).mkdir(parents=True, exist_ok=True)
    return shared


@pytest.fixture(autouse=True)
def _own_llem_cache_dir(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    _shared_llem_cache: Path,
) -> None:
    """Each test has its own llem cache directory (idle baselines, load times, crash records),
    never ~/.cache, beside its tmp_path (which stays empty for the test); its GGUF copies and
    lm-eval index are the run's (``SHARED_CACHE``)."""
    cache = tmp_path_factory.mktemp("llem-cache")
    if request.node.get_closest_marker("own_llem_cache") is None:
        for name in SHARED_CACHE:
            (cache / name).symlink_to(_shared_llem_cache / name, target_is_directory=True)
    monkeypatch.setenv("LLEM_CACHE_DIR", str(cache))


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


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The fork servers of ``llem.testing.forked_cli`` stop and are waited for, so the CPU time of
    the runs they forked counts as this process's children's (what ``/usr/bin/time`` shows)."""
    from llem.testing import forked_cli

    forked_cli.stop_servers()

"""torch's CPU threads: chosen per launcher (or from pytorch.num_threads), set, and recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llem.config.schema import ExperimentConfig
from llem.result import RunResult
from llem.runner import threads
from llem.runner.threads import (
    Threads,
    choose_threads,
    points_at_once,
    settle_threads,
    usable_cpus,
)
from llem.testing.cli import output, run_llem

FAST = ["decoder.max_new_tokens=2", "dataset.n_prompts=2", "measurement.warmup=0"]
# These tests count the CPUs llem gives torch: they run on every CPU, not on their pytest-xdist
# worker's share (tests/conftest.py), and CPUS is what usable_cpus() says while they run.
pytestmark = pytest.mark.all_cpus
_EVERY = os.environ.get("LLEM_TESTS_ALL_CPUS")
CPUS = len(_EVERY.split(",")) if _EVERY else usable_cpus()
needs_two_cpus = pytest.mark.skipif(CPUS < 2, reason="needs 2 usable CPUs to tell 1 thread apart")


def _hydra(*overrides: str) -> dict[str, Any]:
    """The ``hydra`` node a job of these overrides sees (Hydra's own composition)."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from llem.config.store import register_configs

    register_configs()
    with initialize_config_module("llem.conf", version_base="1.3"):
        cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
    node = OmegaConf.to_container(cfg.hydra, resolve=False)
    assert isinstance(node, dict)
    return node


def test_joblib_running_two_points_at_once_gives_each_half_the_cpus() -> None:
    hydra = _hydra(
        "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.sweeper.max_batch_size=2"
    )
    assert points_at_once(hydra, 8) == (2, "joblib")
    assert choose_threads(None, 8, 2) == 4
    assert choose_threads(None, 2, 2) == 1


def test_joblib_gets_every_cpu_while_llems_sweeper_hands_it_one_point_at_a_time() -> None:
    """llem's sweeper gives local launchers one point at a time by default: joblib's n_jobs
    (-1: every CPU) does not make points share the CPUs."""
    assert points_at_once(_hydra("hydra/launcher=joblib"), 8) == (1, "joblib")
    hydra = _hydra("hydra/launcher=joblib", "hydra.sweeper.max_batch_size=4")
    assert points_at_once(hydra, 8) == (4, "joblib")  # n_jobs=-1: up to 8 at once
    hydra = _hydra("hydra/launcher=joblib", "hydra.launcher.n_jobs=-7")
    assert points_at_once({**hydra, "sweeper": {"max_batch_size": 4}}, 8) == (2, "joblib")


def test_in_process_and_slurm_launchers_give_a_point_all_its_cpus() -> None:
    assert points_at_once(None, 8) == (1, "in-process")
    assert points_at_once(_hydra(), 8) == (1, "basic")
    assert points_at_once(_hydra("hydra/launcher=slurm_cpu"), 8) == (1, "slurm_cpu")
    assert points_at_once(_hydra("hydra/launcher=submitit_local"), 8) == (1, "submitit_local")
    hydra = _hydra("hydra/launcher=submitit_local", "hydra.sweeper.max_batch_size=2")
    assert points_at_once(hydra, 8) == (2, "submitit_local")


def test_a_slurm_job_uses_its_own_cpu_count() -> None:
    assert usable_cpus({"SLURM_CPUS_PER_TASK": "1"}) == 1
    assert usable_cpus({"SLURM_CPUS_PER_TASK": str(CPUS + 8)}) == CPUS  # not more than it has


def test_pytorch_num_threads_wins_and_the_choice_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_to: list[int] = []
    monkeypatch.setattr(threads, "_apply", lambda n, why: set_to.append(n) or Threads(n, n))
    monkeypatch.setattr(threads, "usable_cpus", lambda environ=None: 8)
    exp = ExperimentConfig(backend="pytorch")
    hydra = _hydra(
        "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.sweeper.max_batch_size=2"
    )
    assert settle_threads(exp, hydra).intra_op == 4
    exp.pytorch.num_threads = 3
    chosen = settle_threads(exp, hydra)
    assert set_to == [4, 3]
    result = RunResult(status="ok")
    chosen.record(result)
    assert (result.hardware.torch_threads, result.hardware.torch_interop_threads) == (3, 3)
    loaded = RunResult.from_json(json.loads(json.dumps(result.to_json())))
    assert loaded.hardware.torch_threads == 3


def test_a_vllm_run_records_null_threads_with_the_reason() -> None:
    result = RunResult(status="ok")
    settle_threads(ExperimentConfig(backend="vllm")).record(result)
    assert result.hardware.torch_threads is None
    assert "vLLM engine" in result.null_reasons["hardware.torch_threads"]
    assert "vLLM engine" in result.null_reasons["hardware.torch_interop_threads"]


def test_an_old_result_without_thread_counts_loads_with_them_null() -> None:
    data = RunResult(status="ok").to_json()
    del data["hardware"]["torch_threads"], data["hardware"]["torch_interop_threads"]
    assert RunResult.from_json(data).hardware.torch_threads is None


@pytest.mark.slow
def test_inter_op_threads_that_can_no_longer_change_are_recorded_as_they_are() -> None:
    """torch sets inter-op threads once per process: a second count keeps the first."""
    code = (
        "from llem.runner.threads import _apply\n"
        "a = _apply(1, 'first'); b = _apply(2, 'second')\n"
        "print(a.intra_op, a.inter_op, b.intra_op, b.inter_op)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "1", "2", "1"]


@needs_two_cpus
@pytest.mark.slow
def test_a_run_under_omp_num_threads_1_still_uses_every_usable_cpu(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what joblib's workers inherit
    run_dir = tmp_path / "run"
    proc = run_llem(
        "model=hf", f"model.name_or_path={tiny_model_dir}", *FAST, f"hydra.run.dir={run_dir}"
    )
    assert proc.returncode == 0, output(proc)
    hardware = json.loads((run_dir / "result.json").read_text())["hardware"]
    assert hardware["torch_threads"] == CPUS
    assert hardware["torch_interop_threads"] == CPUS
    line = f"torch threads: {CPUS} ({CPUS} usable CPUs / 1 point at a time, basic launcher); "
    assert line + "OMP_NUM_THREADS=1 would have given 1" in proc.stdout


@needs_two_cpus
@pytest.mark.slow
def test_a_joblib_sweep_runs_torch_on_every_cpu(tiny_model_dir: Path, tmp_path: Path) -> None:
    """joblib's workers inherit OMP_NUM_THREADS=1; llem runs their points on every CPU."""
    sweep = tmp_path / "sweep"
    proc = run_llem(
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        *FAST,
        "pytorch.batch_size=1,2",
        "hydra/launcher=joblib",
        "~hydra.callbacks.report",
        f"hydra.sweep.dir={sweep}",
        multirun=True,
        timeout=300,
    )
    assert proc.returncode == 0, output(proc)
    for i in (0, 1):
        hardware = json.loads((sweep / str(i) / "result.json").read_text())["hardware"]
        assert hardware["torch_threads"] == CPUS
    log = (sweep / "0" / "llem.log").read_text()
    assert f"torch threads: {CPUS} ({CPUS} usable CPUs / 1 point at a time, joblib launcher)" in log

"""measurement.boundary end to end: a run through the Runner on a replayed GPU trace and planted
RAPL counters (scripted read by read: the window's start, then its end), and through the command
line on this machine, which has no RAPL."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import llem.measure.session as session_module
import llem.runner.runner as runner_module
from llem.backends.types import BatchOutput, LoadedModel, Prompt
from llem.config.validate import to_experiment
from llem.devices.cpu_energy import RaplReader
from llem.result import RunResult
from llem.runner import Runner
from llem.testing.cli import compose_tiny, output, run_llem
from llem.testing.planted_rapl import MAX_UJ, ScriptedCounters, plant_zone

POWER_W = 150.0  # the replayed GPU trace
# planted counters (uJ): at the window's start, at its end
PKG_UJ = (MAX_UJ - 2_000_000, 3_000_000)  # wraps inside the window: 2 J + 3 J
DRAM_UJ = (1_000_000, 1_500_000)  # 0.5 J
PKG_J, DRAM_J = 5.0, 0.5


class Echo:
    """An engine whose every generate call gives 3 tokens per prompt after 0.02 s."""

    name = "pytorch"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def load_key(self, device: str) -> str:
        return "echo"

    def torch_device_indices(self) -> list[int]:
        return []

    def energy_refusal(self, measurement: object) -> str | None:
        return None

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        return [list(prompts)]

    def batch_size(self, loaded: LoadedModel) -> int:
        return 2

    def load(self, device: str) -> LoadedModel:
        return LoadedModel(None, self.tokenizer, "cpu", "float32", {}, "fake", 0.0, "fake", None)

    def warm_up(self, loaded: LoadedModel, batches: Any, n_batches: int) -> None:
        pass

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        start = time.perf_counter()
        time.sleep(0.02)
        end = time.perf_counter()
        n = len(prompts)
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[5] * n,
            output_tokens=[3] * n,
            step_times_s=[start + 0.005, start + 0.01, end],
            step_tokens=[1, 1, 1],
            texts=["a b c"] * n,
        )

    def unload(self, loaded: LoadedModel | None) -> None:
        pass


def _planted_rapl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pkg_script: list[Any]) -> None:
    root = tmp_path / "powercap"
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    dram = plant_zone(root, "intel-rapl:0:0", "dram", 0)
    counters = ScriptedCounters({pkg: pkg_script, dram: list(DRAM_UJ)})
    monkeypatch.setattr(
        session_module, "open_rapl", lambda root_, clock: RaplReader(root, read_text=counters)
    )


def _run(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str):
    from llem.testing.tinymodel import tiny_tokenizer

    trace = tmp_path / "trace.csv"
    trace.write_text(f"time_s,device,power_w\n0,g,{POWER_W}\n100000,g,{POWER_W}\n")
    exp = to_experiment(
        compose_tiny(
            tiny_model_dir,
            "measurement.warmup=0",
            "measurement.cooldown_s=0",
            "measurement.idle_baseline_s=0",
            "measurement.min_window_s=0.05",
            "measurement.energy=replay",
            f"measurement.replay_trace={trace}",
            *extra,
        )
    )
    monkeypatch.setattr(runner_module, "create_backend", lambda exp: Echo(tiny_tokenizer()))
    result = Runner().run(exp, tmp_path / "run")
    written = RunResult.from_json(tmp_path / "run" / "result.json")
    return result, written


def test_node_run_gives_each_component_its_planted_energy(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _planted_rapl(tmp_path, monkeypatch, list(PKG_UJ))
    result, written = _run(tiny_model_dir, tmp_path, monkeypatch, "measurement.boundary=node")
    b = written.boundary
    assert result.status == "ok" and b is not None
    assert (b.boundary, b.cpu_packages, b.dram) == ("node", ["package-0"], ["dram-0"])
    assert b.gpu_j == written.energy.total_j and b.gpu_j is not None
    assert b.cpu_package_j == pytest.approx(PKG_J)  # the counter wrapped inside the window
    assert b.dram_j == pytest.approx(DRAM_J)
    assert b.total_j == pytest.approx(b.gpu_j + PKG_J + DRAM_J)
    tokens = written.workload.output_tokens
    assert tokens and b.dram_j_per_output_token == pytest.approx(DRAM_J / tokens)
    assert b.j_per_output_token == pytest.approx((b.gpu_j + PKG_J + DRAM_J) / tokens)
    assert b.cpu_packages_note and b.cpu_packages_note.startswith("packages read: 0")
    # no idle baseline was measured: the idle-adjusted figures say so
    assert written.null_reasons["boundary.idle_adjusted_j"]
    assert written.energy.cpu_package_j == pytest.approx(PKG_J)


def test_root_only_package_counter_voids_it_and_the_total(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _planted_rapl(tmp_path, monkeypatch, [PermissionError(13, "Permission denied")])
    _, written = _run(tiny_model_dir, tmp_path, monkeypatch, "measurement.boundary=node")
    b = written.boundary
    assert b is not None and b.cpu_package_j is None and b.total_j is None
    assert b.dram_j == pytest.approx(DRAM_J)
    why = written.null_reasons["boundary.cpu_package_j"]
    assert why.startswith("package-0: permission denied reading ") and "root" in why
    assert why in written.null_reasons["boundary.total_j"]


def test_gpu_boundary_is_the_default_and_lists_the_cpu_outside(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _planted_rapl(tmp_path, monkeypatch, list(PKG_UJ))
    _, written = _run(tiny_model_dir, tmp_path, monkeypatch)
    b = written.boundary
    assert b is not None and b.boundary == "gpu" and b.cpu_packages == []
    assert b.total_j == written.energy.total_j and b.cpu_package_j is None
    assert any("CPU packages" in s for s in b.outside)
    assert any("DRAM" in s for s in b.outside)
    assert written.energy.cpu_package_j == pytest.approx(PKG_J)  # still read, as before


def _tiny(model_dir: Path) -> list[str]:
    return ["model=hf", f"model.name_or_path={model_dir}", "device=cpu", "measurement.warmup=0"]


def test_bad_boundary_is_one_line_exit_2(tiny_model_dir: Path, tmp_path: Path) -> None:
    proc = run_llem(*_tiny(tiny_model_dir), "measurement.boundary=bogus", cwd=tmp_path)
    assert proc.returncode == 2, output(proc)
    assert "measurement.boundary=bogus" in proc.stderr and "gpu, node" in proc.stderr
    assert "Traceback" not in proc.stderr, output(proc)


@pytest.mark.slow
def test_node_boundary_without_rapl_runs_with_the_reason(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    if Path("/sys/class/powercap").exists():
        pytest.skip("this machine has powercap: the no-RAPL reason cannot be seen here")
    run_dir = tmp_path / "run"
    proc = run_llem(
        *_tiny(tiny_model_dir),
        "measurement.boundary=node",
        "decoder.max_new_tokens=2",
        "measurement.min_window_s=0",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    result = json.loads((run_dir / "result.json").read_text())
    b = result["boundary"]
    assert b["boundary"] == "node" and b["cpu_package_j"] is None and b["total_j"] is None
    why = result["null_reasons"]["boundary.cpu_package_j"]
    assert why.startswith("no RAPL on this machine: ")

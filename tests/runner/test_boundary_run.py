"""measurement.boundary end to end: a run through the Runner on a replayed GPU trace and planted
RAPL counters (scripted read by read: a node run's pre-flight, the window's start, its end), and
through the command line on this machine, which has no RAPL: a node of which it reads no part is
refused."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import llem.measure.session as session_module
import llem.runner.runner as runner_module
from llem.config.validate import to_experiment
from llem.devices.cpu_energy import RaplReader
from llem.errors import PreflightError
from llem.result import RunResult
from llem.runner import Runner
from llem.testing.cli import compose_tiny, output
from llem.testing.forked_cli import run_llem
from llem.testing.planted_rapl import MAX_UJ, ScriptedCounters, plant_zone
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import BatchOutput, Prompt

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

    def measures_named_gpus(self, measurement: object) -> bool:
        return False

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


def _planted_rapl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pkg_script: list[Any], node: bool = True
) -> None:
    """Counters read as the scripts say; a node run's pre-flight reads each once before the run
    (llem.measure.node_check), so its scripts start with that read (the window's first value)."""
    root = tmp_path / "powercap"
    pkg = plant_zone(root, "intel-rapl:0", "package-0", 0)
    dram = plant_zone(root, "intel-rapl:0:0", "dram", 0)
    dram_script = list(DRAM_UJ)
    if node:
        pkg_script, dram_script = pkg_script[:1] + pkg_script, dram_script[:1] + dram_script
    counters = ScriptedCounters({pkg: pkg_script, dram: dram_script})
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
    monkeypatch.setattr(
        runner_module, "create_backend", lambda exp, run_dir: Echo(tiny_tokenizer())
    )
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
    _planted_rapl(tmp_path, monkeypatch, list(PKG_UJ), node=False)
    _, written = _run(tiny_model_dir, tmp_path, monkeypatch)
    b = written.boundary
    assert b is not None and b.boundary == "gpu" and b.cpu_packages == []
    assert b.total_j == written.energy.total_j and b.cpu_package_j is None
    assert any("CPU packages" in s for s in b.outside)
    assert any("DRAM" in s for s in b.outside)
    assert written.energy.cpu_package_j == pytest.approx(PKG_J)  # still read, as before


def _no_rapl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "no-powercap"
    monkeypatch.setattr(session_module, "open_rapl", lambda root_, clock: RaplReader(root))
    return root


def test_a_node_of_which_no_part_can_be_read_is_refused_before_anything_loads(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _no_rapl(tmp_path, monkeypatch)

    def no_backend(exp: object) -> None:
        raise AssertionError("the engine was created: the run went past pre-flight")

    monkeypatch.setattr(runner_module, "create_backend", no_backend)
    cfg = compose_tiny(tiny_model_dir, "measurement.energy=auto", "measurement.boundary=node")
    with pytest.raises(PreflightError) as caught:
        Runner().run(to_experiment(cfg), tmp_path / "run")
    (problem,) = caught.value.problems
    assert problem.startswith("measurement.boundary=node: no part of the node can be read here")
    assert "(GPUs: " in problem  # no GPU library here, or the run is not on its GPU
    assert f"CPU packages and DRAM: no RAPL on this machine: {root} has no " in problem
    assert problem.endswith(
        "leave measurement.boundary at gpu (the default: a run whose energy "
        "cannot be read still measures its time, and says why)"
    )
    assert caught.value.exit_code == 3 and not (tmp_path / "run").exists()


def test_a_node_of_which_part_can_be_read_runs_with_the_warning_recorded(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _no_rapl(tmp_path, monkeypatch)
    result, written = _run(tiny_model_dir, tmp_path, monkeypatch, "measurement.boundary=node")
    assert result.status == "ok" and written.boundary is not None
    assert written.lifecycle.preflight_warnings == [
        "measurement.boundary=node: part of the node cannot be read (CPU packages and DRAM: no "
        f"RAPL on this machine: {root} has no intel-rapl zones), so the node's total_j will be "
        "null; GPUs keep their own figures"
    ]
    assert written.boundary.gpu_j is not None and written.boundary.total_j is None


def _tiny(model_dir: Path) -> list[str]:
    return ["model=hf", f"model.name_or_path={model_dir}", "device=cpu", "measurement.warmup=0"]


def test_bad_boundary_is_one_line_exit_2(tiny_model_dir: Path, tmp_path: Path) -> None:
    proc = run_llem(*_tiny(tiny_model_dir), "measurement.boundary=bogus", cwd=tmp_path)
    assert proc.returncode == 2, output(proc)
    assert "measurement.boundary=bogus" in proc.stderr and "gpu, node" in proc.stderr
    assert "Traceback" not in proc.stderr, output(proc)


@pytest.mark.slow
def test_node_boundary_on_a_machine_that_reads_no_part_of_it_is_refused(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """This machine (no RAPL; a CPU run reads no GPU): exit 3 before the model loads, one line
    naming each part and why, nothing written."""
    if Path("/sys/class/powercap").exists():
        pytest.skip("this machine has powercap: the no-RAPL refusal cannot be seen here")
    run_dir = tmp_path / "run"
    proc = run_llem(
        *_tiny(tiny_model_dir),
        "measurement.boundary=node",
        "decoder.max_new_tokens=2",
        "measurement.min_window_s=0",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode == 3, output(proc)
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "measurement.boundary=node: no part of the node can be read here (GPUs: " in line
    assert "CPU packages and DRAM: no RAPL on this machine: /sys/class/powercap has no" in line
    assert "leave measurement.boundary at gpu" in line
    assert "Traceback" not in proc.stderr and not run_dir.exists(), output(proc)

"""What a CPU run tells a person about energy: one line per run, each null reason about its own
field, and the report naming the reason once (issue 17 item 13)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from llem.result import Energy, RunResult
from llem.runner.summary import boundary_line, energy_line, summary_line
from llem.testing.cli import llem_env, output
from llem.testing.forked_cli import run_llem

NO_NVML = "no NVIDIA GPU/NVML (NVMLError_LibraryNotFound)"
NO_RAPL = "no RAPL powercap files (/sys/class/powercap/intel-rapl:*/energy_uj)"


def _unavailable(**fields: object) -> Energy:
    base: dict[str, object] = {
        "source": "unavailable",
        "unavailable_reason": NO_NVML,
        "cpu_source": "unavailable",
        "cpu_unavailable_reason": NO_RAPL,
    }
    return Energy(**{**base, **fields})  # type: ignore[arg-type]


def test_energy_line_says_gpu_and_cpu_package_reasons_once() -> None:
    assert energy_line(_unavailable()) == (
        f"energy: unavailable: {NO_NVML}; CPU package energy: {NO_RAPL}"
    )


def test_energy_line_with_rapl_gives_the_cpu_figure() -> None:
    e = _unavailable(cpu_source="rapl", cpu_package_j=12.34, cpu_unavailable_reason=None)
    assert energy_line(e) == f"energy: unavailable: {NO_NVML}; CPU package energy: 12.3 J (RAPL)"


def test_energy_none_is_said_once() -> None:
    why = "disabled by measurement.energy=none"
    e = _unavailable(unavailable_reason=why, cpu_unavailable_reason=why)
    assert energy_line(e) == f"energy: unavailable: {why}"


def test_measured_energy() -> None:
    e = Energy(
        source="nvml_counter", total_j=100.0, j_per_output_token=0.5, cpu_unavailable_reason=NO_RAPL
    )
    assert energy_line(e).startswith("energy: 100.0 J (nvml_counter), 0.5 J/token; ")


def test_summary_puts_energy_on_its_own_line(tmp_path: Path) -> None:
    result = RunResult(status="ok", model="m", device="cpu", dtype="float32")
    result.energy = _unavailable()
    lines = summary_line(result, tmp_path).splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("llem: m on cpu (float32): ") and lines[0].endswith("tokens/s")
    assert lines[1] == energy_line(result.energy)
    assert lines[2] == f"result: {tmp_path / 'result.json'}"


def test_a_sweep_says_an_energy_reason_every_point_shares_once(tmp_path: Path) -> None:
    """No GPU and no RAPL: the first point of a sweep says so, the others do not repeat it; a
    measured figure is printed for every point, the CPU reason beside it only the first time;
    single runs (no sweep's record passed) always say it."""
    sweep, said = tmp_path / "sweep", set[str]()
    result = RunResult(status="ok", model="m", device="cpu", dtype="float32")
    result.energy = _unavailable()
    first, second = (summary_line(result, sweep / str(i), said) for i in (0, 1))
    assert energy_line(result.energy) in first.splitlines()
    assert not [line for line in second.splitlines() if line.startswith("energy")]
    assert second.splitlines()[-1] == f"result: {sweep / '1' / 'result.json'}"
    gpu = RunResult(status="ok", model="m", device="cuda", dtype="float16")
    gpu.energy = Energy(source="nvml_counter", total_j=100.0, cpu_unavailable_reason=NO_RAPL)
    gpu_sweep, gpu_said = tmp_path / "gpu", set[str]()
    lines = [summary_line(gpu, gpu_sweep / str(i), gpu_said).splitlines()[1] for i in (0, 1)]
    assert lines == [f"energy: 100.0 J (nvml_counter); CPU package energy: {NO_RAPL}"] + [
        "energy: 100.0 J (nvml_counter)"
    ]
    for run in ("a", "b"):
        assert energy_line(result.energy) in summary_line(result, tmp_path / run).splitlines()


def test_a_served_run_gets_one_serving_line(tmp_path: Path) -> None:
    from llem.result import Goodput, Traffic
    from llem.result.sections import Percentiles

    result = RunResult(status="ok", model="m", device="cpu", dtype="float32")
    result.energy = _unavailable()
    result.workload.requests = 16
    result.traffic = Traffic(kind="poisson", rate_per_s=0.5, n_requests=16)
    result.latency.ttft_ms = Percentiles(p50=50.0, p90=1790.4, p99=2000.0)
    result.latency.tpot_ms = Percentiles(p50=30.0, p90=41.25, p99=50.0)
    result.goodput = Goodput(2000.0, 200.0, None, 15, 15 / 16, 0.4, 20.0)
    result.null_reasons["steady_state"] = "too few requests"
    lines = summary_line(result, tmp_path).splitlines()
    assert lines[1] == (
        "serving: poisson at 0.5/s, TTFT p90 1790 ms, TPOT p90 41.2 ms, 15/16 met the SLOs, "
        "no steady state (too few requests)"
    )
    assert len(lines) == 4
    result.traffic, result.goodput = Traffic(kind="offline"), None
    assert len(summary_line(result, tmp_path).splitlines()) == 3  # an offline run: no such line


@pytest.fixture(scope="module")
def cpu_sweep(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> tuple[str, Path]:
    """A 2-point CPU sweep with measurement.energy=auto (the default), as a newcomer runs it."""
    sweep = tmp_path_factory.mktemp("cpu-sweep") / "sw"
    proc = run_llem(
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "dataset.n_prompts=2",
        "decoder.max_new_tokens=2",
        "measurement.warmup=0",
        "pytorch.batch_size=1,2",
        f"hydra.sweep.dir={sweep}",
        multirun=True,
        cwd=sweep.parent,
        timeout=300,
    )
    assert proc.returncode == 0, output(proc)
    return proc.stdout + proc.stderr, sweep


def _reason(sweep: Path) -> str:
    reason = json.loads((sweep / "0" / "result.json").read_text())["energy"]["unavailable_reason"]
    assert reason
    return str(reason)


@pytest.mark.slow
def test_a_sweep_prints_the_energy_line_its_points_share_once(
    cpu_sweep: tuple[str, Path],
) -> None:
    text, sweep = cpu_sweep
    reason = _reason(sweep)
    energy_lines = [line for line in text.splitlines() if line.startswith("energy: ")]
    assert len(energy_lines) == 1, text  # the first point's; the second's is the same
    assert energy_lines[0].startswith(f"energy: unavailable: {reason}")
    assert "no GPU energy to measure" not in text
    run_text = text.split("sweep finished")[0]  # the runs' own output, before the report
    assert run_text.count(reason) == 1, run_text


@pytest.mark.slow
def test_thermal_and_memory_null_reasons_are_about_their_own_field(
    cpu_sweep: tuple[str, Path],
) -> None:
    _, sweep = cpu_sweep
    reasons = json.loads((sweep / "0" / "result.json").read_text())["null_reasons"]
    own = {k: v for k, v in reasons.items() if k.startswith(("thermal.", "memory."))}
    assert {"thermal.max_temp_c", "memory.peak_device_used_mb"} <= set(own)
    for key, why in own.items():
        assert "energy" not in why.lower(), f"{key}: {why}"
    assert "temperature" in own["thermal.max_temp_c"]
    assert "memory" in own["memory.peak_device_used_mb"]


@pytest.mark.slow
def test_the_report_names_the_energy_reason_at_most_once(cpu_sweep: tuple[str, Path]) -> None:
    _, sweep = cpu_sweep
    report = subprocess.run(
        [sys.executable, "-m", "llem.report", str(sweep)],
        env=llem_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = report.stdout + report.stderr
    assert report.returncode == 0, text
    assert text.count(_reason(sweep)) <= 1, text


def test_a_node_run_says_what_its_total_covers_component_by_component() -> None:
    from llem.result import Boundary

    result = RunResult(status="ok")
    result.boundary = Boundary(
        boundary="node", gpu_j=500.0, cpu_package_j=160.0, total_j=660.0, j_per_output_token=0.66
    )
    result.null_reasons["boundary.dram_j"] = (
        "outside the boundary: this CPU's RAPL has no DRAM domain"
    )
    assert boundary_line(result) == (
        "boundary: node = GPUs 500.0 J + CPU packages 160.0 J + DRAM: outside the boundary: "
        "this CPU's RAPL has no DRAM domain = 660.0 J, 0.66 J/token"
    )
    result.boundary = Boundary(boundary="gpu", gpu_j=500.0, total_j=500.0)
    assert boundary_line(result) is None  # the energy line says it


def test_a_node_line_gives_the_gpus_bound_and_says_the_total_has_none() -> None:
    from llem.result import Boundary

    result = RunResult(status="ok")
    result.boundary = Boundary(
        boundary="node",
        gpu_j=500.0,
        gpu_j_uncertainty=27.5,
        cpu_package_j=160.0,
        dram_j=20.0,
        total_j=680.0,
        j_per_output_token=0.68,
    )
    result.null_reasons["boundary.total_j_uncertainty"] = "cpu_package and dram hold RAPL energy"
    assert boundary_line(result) == (
        "boundary: node = GPUs 500.0 +/- 27.5 J + CPU packages 160.0 J + DRAM 20.0 J = 680.0 J, "
        "0.68 J/token (no bound: RAPL states no accuracy; see null_reasons)"
    )


def test_each_sweep_command_says_a_shared_energy_reason_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a sweep's points have said is the sweep command's own record, not a module's: a second
    sweep into the same directory in the same process (a re-run through the Python API) says the
    reason every point shares once again, and nothing is looked up on disk."""
    from types import SimpleNamespace

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from llem.app.command import Command
    from llem.app.job import run_task

    result = RunResult(status="ok", model="m", device="cpu", dtype="float32")
    result.energy = _unavailable()
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")  # what Hydra writes above a sweep
    cfg = OmegaConf.create({"sweep": {"reuse_model": False}})
    runner = SimpleNamespace(run=lambda *args, **kwargs: result)

    def point(command: Command, index: int) -> list[str]:
        hc = SimpleNamespace(
            mode=RunMode.MULTIRUN,
            runtime=SimpleNamespace(output_dir=str(sweep / str(index))),
            overrides=SimpleNamespace(task=[f"x={index}"]),
            sweep=SimpleNamespace(dir=str(sweep), subdir=str(index)),
        )
        monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: hc))
        run_task(cfg, command)
        return [line for line in capsys.readouterr().out.splitlines() if line.startswith("energy")]

    for _ in range(2):  # two sweep commands, one after the other, in one process
        command = Command(runner=runner)  # type: ignore[arg-type]
        assert point(command, 0) == [energy_line(result.energy)]
        assert point(command, 1) == []

"""A real ``python -m llem`` process on a planted two-GPU machine with RAPL (node_site):
``measurement.boundary=node`` measures both GPUs, the CPU package and its DRAM over one window, each
its planted power times the window, and says so per component; a GPU index the machine does not
have is one pre-flight line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from llem.testing.cli import llem_command, llem_env

SITE = Path(__file__).resolve().parent / "node_site"
GPU_W = {"GPU-node-0000": 120.0, "GPU-node-1111": 180.0}
PACKAGE_W, DRAM_W = 40.0, 6.0


def _run(
    tmp_path: Path, tiny_model_dir: Path, *extra: str, cpu_only: bool = False
) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "node.json"
    spec.write_text(
        json.dumps(
            {
                "cpu_only": cpu_only,
                "gpu_w": GPU_W,
                "package_w": PACKAGE_W,
                "dram_w": DRAM_W,
                "powercap": str(tmp_path / "powercap"),
            }
        )
    )
    env = llem_env()
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), env["PYTHONPATH"]])
    env["LLEM_CACHE_DIR"] = str(tmp_path / "cache")
    env["LLEM_TEST_NODE_SITE"] = str(spec)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    args = [
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "dataset.n_prompts=2",
        "decoder.max_new_tokens=4",
        "measurement.energy=" + ("auto" if cpu_only else "nvml"),
        "measurement.boundary=node",
        "measurement.min_window_s=1.0",
        "measurement.idle_baseline_s=0",
        f"hydra.run.dir={tmp_path / 'run'}",
        *extra,
    ]
    return subprocess.run(
        llem_command(*args), cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600
    )


@pytest.mark.slow
def test_a_node_run_on_two_gpus_gives_each_component_its_planted_energy(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    proc = _run(tmp_path, tiny_model_dir, "measurement.gpu_indices=[0,1]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    energy, boundary = result["energy"], result["boundary"]
    window_s = energy["window_s"]
    assert window_s >= 1.0
    for uuid, watts in GPU_W.items():
        assert energy["per_device_j"][uuid] == pytest.approx(watts * window_s, rel=0.05)
    gpus_j = sum(GPU_W.values()) * window_s
    assert energy["total_j"] == pytest.approx(gpus_j, rel=0.05)
    assert boundary["boundary"] == "node" and sorted(boundary["gpus"]) == sorted(GPU_W)
    assert boundary["cpu_packages"] == ["package-0"] and boundary["dram"] == ["dram-0"]
    assert boundary["cpu_package_j"] == pytest.approx(PACKAGE_W * window_s, rel=0.05)
    assert boundary["dram_j"] == pytest.approx(DRAM_W * window_s, rel=0.05)
    node_j = gpus_j + (PACKAGE_W + DRAM_W) * window_s
    assert boundary["total_j"] == pytest.approx(node_j, rel=0.05)
    assert boundary["gpu_j_uncertainty"] == energy["total_j_uncertainty"] is not None
    assert boundary["total_j_uncertainty"] is None
    why = result["null_reasons"]["boundary.total_j_uncertainty"]
    assert "RAPL states no accuracy" in why and "RAPL's reading limits" in why
    # two counters (package-0, dram-0): 2 J of 1 ms updates at 500 W, and reads just outside
    # the window on the wall clock
    assert 2.0 < boundary["rapl_reading_limits_j"] < 2.0 + 2 * 500.0 * 0.05
    assert [g["vendor"] for g in result["hardware"]["gpus"]] == ["nvidia", "nvidia"]
    assert set(result["validity"]["per_device"]) == set(GPU_W)
    assert "boundary: node = GPUs" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_gpu_index_the_machine_does_not_have_is_one_preflight_line(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    proc = _run(tmp_path, tiny_model_dir, "measurement.gpu_indices=[0,5]")
    assert proc.returncode == 3, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "measurement.gpu_indices=[0, 5]" in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_cpu_run_on_a_host_without_gpus_has_a_node_total_of_its_packages_and_dram(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    proc = _run(tmp_path, tiny_model_dir, "device=cpu", cpu_only=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    boundary, window_s = result["boundary"], result["energy"]["window_s"]
    assert result["lifecycle"]["preflight_warnings"] == []
    assert boundary["gpus"] == [] and boundary["gpu_j"] is None
    # RAPL is this run's energy, so its window is stretched to min_window_s as a GPU's is (it
    # was 40-70 ms, where the reads' few ms outside the window were 7 % of the figure)
    assert window_s >= 1.0
    assert boundary["cpu_package_j"] == pytest.approx(PACKAGE_W * window_s, rel=0.05)
    assert boundary["dram_j"] == pytest.approx(DRAM_W * window_s, rel=0.05)
    # the planted truth over the window lies within the reading limits the result states
    limits_j = boundary["rapl_reading_limits_j"]
    assert abs(boundary["cpu_package_j"] - PACKAGE_W * window_s) <= limits_j
    assert abs(boundary["dram_j"] - DRAM_W * window_s) <= limits_j
    assert boundary["total_j"] == pytest.approx(boundary["cpu_package_j"] + boundary["dram_j"])
    tokens = result["workload"]["output_tokens"]
    assert boundary["j_per_output_token"] == pytest.approx(boundary["total_j"] / tokens)
    assert "no GPU is visible to NVML or amdsmi" in boundary["outside"][-1]
    assert "boundary: node = GPUs: outside the boundary" in proc.stdout + proc.stderr

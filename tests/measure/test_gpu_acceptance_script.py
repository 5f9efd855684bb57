"""bench/gpu_acceptance.py: without a GPU it says so and exits 0; its power integral is right."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gpu_acceptance  # bench/ is on pytest's pythonpath (pyproject.toml), as the script has it
import pytest

SCRIPT = Path(gpu_acceptance.__file__).resolve()


@pytest.mark.slow
def test_without_a_gpu_it_says_so_and_exits_0():
    if gpu_acceptance.no_gpu_reason() is None:
        pytest.skip("a GPU is here: the script would run the whole acceptance")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("gpu_acceptance: no CUDA GPU here (")


def test_integrated_power_from_a_timeseries(tmp_path):
    rows = ["time_s,device,power_w,temperature_c"]
    rows += [f"{t / 10:.1f},GPU-a,{100 + 10 * t},40" for t in range(11)]  # 100 -> 200 W over 1 s
    rows += [f"{t / 10:.1f},GPU-b,50,40" for t in range(11)] + ["0.5,GPU-b,,40"]
    (tmp_path / "timeseries.csv").write_text("\n".join(rows) + "\n")
    assert gpu_acceptance.integrated_power_j(tmp_path) == pytest.approx(150.0 + 50.0)

"""A real ``python -m llem`` process on the amdsmi double (tests/devices/amd_site): the power cap
asked for is in force during the run and put back after, and the energy is amdsmi's counter."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from llem.testing.cli import llem_command, llem_env

SITE = Path(__file__).resolve().parent / "amd_site"


@pytest.mark.slow
def test_a_run_under_an_amd_power_cap_sets_it_restores_it_and_reads_the_counter(
    tmp_path, tiny_model_dir
) -> None:
    state = tmp_path / "amd.json"
    state.write_text(json.dumps({"power_cap_uw": 750_000_000, "changes": []}))
    env = llem_env()
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), env["PYTHONPATH"]])
    env["LLEM_CACHE_DIR"] = str(tmp_path / "cache")
    env["LLEM_TEST_FAKE_AMDSMI_STATE"] = str(state)
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        env.pop(var, None)
    args = [
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "dataset.n_prompts=2",
        "decoder.max_new_tokens=4",
        "measurement.energy=amdsmi",
        "measurement.min_window_s=0.5",
        "measurement.idle_baseline_s=0",
        "gpu.power_limit_w=400",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    proc = subprocess.run(
        llem_command(*args), cwd=tmp_path, env=env, text=True, capture_output=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = json.loads(state.read_text())
    # set for the run (after the permission check's set-to-itself), then put back
    assert after["changes"][-2:] == [400_000_000, 750_000_000]
    assert after["power_cap_uw"] == 750_000_000
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["energy"]["source"] == "amdsmi_counter"
    (device,) = result["gpu"]["devices"].values()
    assert device["enforced_power_limit_w"] == 400.0
    assert result["gpu"]["restored"] is True

"""Every way out of a real llem process restores the GPU (the NVML test double in a subprocess,
tests/gpu_knob/fake_site): SIGTERM mid-window; and after a SIGKILL, the crash record is picked up
by the next llem start, or by ``python -m llem.gpu restore``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_knob.fake_process import ORIGINAL_MW, gpu_env, gpu_state, restore_records, start_gpu
from llem.testing.cli import llem_command


def _run_until_the_window(tmp_path: Path, tiny_model_dir: Path) -> subprocess.Popen[str]:
    """A llem run with gpu.power_limit_w=300 and gpu.sm_clock_mhz=1410, held inside its window."""
    start_gpu(tmp_path)
    marker = tmp_path / "window-open"
    env = gpu_env(tmp_path, LLEM_TEST_WINDOW_MARKER=str(marker), LLEM_TEST_WINDOW_WAIT_S="120")
    args = [
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "dataset.n_prompts=2",
        "decoder.max_new_tokens=4",
        "gpu.power_limit_w=300",
        "gpu.sm_clock_mhz=1410",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    proc = subprocess.Popen(
        llem_command(*args),
        cwd=tmp_path,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the run never reached its window:\n{out[-3000:]}\n{err[-3000:]}")
        time.sleep(0.1)
    return proc


@pytest.mark.slow
def test_sigterm_mid_window_restores_and_exits_143(tmp_path, tiny_model_dir) -> None:
    proc = _run_until_the_window(tmp_path, tiny_model_dir)
    held = gpu_state(tmp_path)
    assert held["power_limit_mw"] == 300_000 and held["sm_lock"] == [1410, 1410]
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 15, err[-3000:]
    after = gpu_state(tmp_path)
    assert after["power_limit_mw"] == ORIGINAL_MW and after["sm_lock"] is None
    assert restore_records(tmp_path) == []
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "failed" and result["gpu"]["restored"] is True


def _killed_mid_window(tmp_path: Path, tiny_model_dir: Path) -> None:
    proc = _run_until_the_window(tmp_path, tiny_model_dir)
    proc.kill()  # SIGKILL: nothing of llem runs
    proc.communicate(timeout=60)
    assert gpu_state(tmp_path)["power_limit_mw"] == 300_000
    assert len(restore_records(tmp_path)) == 1


@pytest.mark.slow
def test_a_crash_record_is_restored_by_the_next_llem_start(tmp_path, tiny_model_dir) -> None:
    _killed_mid_window(tmp_path, tiny_model_dir)
    proc = subprocess.run(
        llem_command("model=hf", f"model.name_or_path={tiny_model_dir}", "dry_run=true"),
        cwd=tmp_path,
        env=gpu_env(tmp_path),
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    restored = [line for line in proc.stderr.splitlines() if "restored GPU settings" in line]
    assert len(restored) == 1, proc.stderr
    assert "power limit 450 W, SM clock unlocked" in restored[0]
    after = gpu_state(tmp_path)
    assert after["power_limit_mw"] == ORIGINAL_MW and after["sm_lock"] is None
    assert restore_records(tmp_path) == []


@pytest.mark.slow
def test_python_m_llem_gpu_restore_by_hand(tmp_path, tiny_model_dir) -> None:
    _killed_mid_window(tmp_path, tiny_model_dir)
    show = subprocess.run(
        [sys.executable, "-m", "llem.gpu", "show"],
        env=gpu_env(tmp_path),
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert show.returncode == 0, show.stderr
    assert "power limit 300 W (enforced 300 W, allowed 200-700 W), SM clock 1410 MHz" in show.stdout
    assert "(leftover): GPU 0 (GPU-fake-0000): power limit 450 W, SM clock unlocked" in show.stdout
    proc = subprocess.run(
        [sys.executable, "-m", "llem.gpu", "restore"],
        env=gpu_env(tmp_path),
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "restored: GPU 0 (GPU-fake-0000): power limit 450 W, SM clock unlocked"
    )
    assert gpu_state(tmp_path)["power_limit_mw"] == ORIGINAL_MW and restore_records(tmp_path) == []


@pytest.mark.slow
def test_a_restore_that_fails_keeps_the_record_and_exits_1(tmp_path, tiny_model_dir) -> None:
    _killed_mid_window(tmp_path, tiny_model_dir)
    env = gpu_env(tmp_path, LLEM_TEST_FAKE_NVML_CONTROL=json.dumps({"failing_restore": True}))
    proc = subprocess.run(
        [sys.executable, "-m", "llem.gpu", "restore"],
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: not restored (unlocking the SM clock of GPU 0")
    assert len(restore_records(tmp_path)) == 1

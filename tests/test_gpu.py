"""Real-hardware checks: CUDA generation and NVML energy. Skipped with a reason without a GPU."""

from __future__ import annotations

import json
import time

import pytest
from test_entrypoint import FAST, llem

from llem.config.schema import MeasurementConfig

pytestmark = pytest.mark.gpu


def test_nvml_counter_measures_a_busy_window():
    import torch

    from llem.measure import MeasurementSession

    cfg = MeasurementConfig(idle_baseline_s=1.0, min_window_s=2.0)
    session = MeasurementSession(cfg, torch_device_indices=[0], device_type="cuda")
    session.start()
    a = torch.randn(4096, 4096, device="cuda")
    with session.window() as w:
        while w.elapsed_s() < 3.0:
            a = (a @ a).clamp_(-1, 1)
    report = session.measurement(output_tokens=1000, requests=10)
    session.close()
    e = report.energy
    assert e.source in ("nvml_counter", "nvml_power")
    assert e.total_j > 0 and e.avg_power_w > e.idle_power_w > 0
    assert e.j_per_output_token == pytest.approx(e.total_j / 1000)
    assert report.devices[0].uuid.startswith("GPU-")


def test_cuda_run_end_to_end(tmp_path, tiny_model_dir):
    t0 = time.perf_counter()
    proc = llem(
        tmp_path,
        "device=cuda",
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        *FAST,
        "measurement.idle_baseline_s=1",
        "measurement.min_window_s=2",
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    result = json.loads(next((tmp_path / "outputs").rglob("result.json")).read_text())
    assert result["device"] == "cuda"
    assert result["energy"]["source"] in ("nvml_counter", "nvml_power")
    assert result["energy"]["j_per_output_token"] > 0
    assert result["memory"]["peak_allocated_mb"] > 0
    assert result["compute"]["decode_bandwidth_utilisation"] is not None
    assert time.perf_counter() - t0 < 300

"""Real-hardware checks: CUDA generation and NVML energy. Skipped with a reason without a GPU."""

from __future__ import annotations

import json
import time

import pytest
from app.test_entrypoint import FAST, llem

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


# ------------------------------------------------------------------ the GPU as a knob (gpu.*)
def _power_limit_target():
    """(NVML, control, GPU 0, its state, the minimum + 100 W); skips without the right to set."""
    from llem.devices.gpu_control import GpuControl
    from llem.devices.nvidia import init_nvml

    nvml = init_nvml()
    control = GpuControl(nvml)
    gpu = nvml.gpus()[0]
    state = control.state(gpu)
    if state.power_range_w is None:
        nvml.shutdown()
        pytest.skip(f"GPU 0 has no settable power limit ({state.null_reasons})")
    problem = control.permission_problem(gpu)
    if problem:
        nvml.shutdown()
        pytest.skip(problem)
    lo, hi = state.power_range_w
    return nvml, control, gpu, state, min(lo + 100, hi)


def test_power_limit_is_set_enforced_and_restored_through_nvml():
    nvml, control, gpu, before, target = _power_limit_target()
    try:
        control.set_power_limit(gpu, target)
        during = control.state(gpu)
        assert during.power_limit_w == pytest.approx(target, abs=1)
        assert during.enforced_power_limit_w == pytest.approx(target, abs=1)
    finally:
        control.set_power_limit(gpu, before.power_limit_w)
        after = control.state(gpu)
        nvml.shutdown()
    assert after.power_limit_w == pytest.approx(before.power_limit_w, abs=1)


def test_a_run_under_a_power_limit_records_it_and_restores_the_original(tmp_path, tiny_model_dir):
    nvml, _, _, before, target = _power_limit_target()  # NVML's GPU 0: the one torch's cuda:0 is
    nvml.shutdown()
    proc = llem(
        tmp_path,
        "device=cuda",
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        *FAST,
        "measurement.idle_baseline_s=1",
        "measurement.min_window_s=2",
        f"gpu.power_limit_w={target:g}",
        "measurement.gpu_indices=[0]",
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    result = json.loads(next((tmp_path / "outputs").rglob("result.json")).read_text())
    (device,) = result["gpu"]["devices"].values()  # torch's cuda:0
    assert device["enforced_power_limit_w"] == pytest.approx(target, abs=1)
    assert device["power_limit_w_before"] == pytest.approx(before.power_limit_w, abs=1)
    assert result["gpu"]["restored"] is True
    assert result["validity"]["checks"]["gpu_settings"] == "passed"
    from llem.devices.gpu_control import GpuControl
    from llem.devices.nvidia import init_nvml

    nvml = init_nvml()
    try:
        after = GpuControl(nvml).state(nvml.gpus()[device["vendor_index"]])
    finally:
        nvml.shutdown()
    assert after.power_limit_w == pytest.approx(before.power_limit_w, abs=1)


def test_an_energy_search_over_a_power_limit_interval_runs_on_nvml(tmp_path, tiny_model_dir):
    """hydra/sweeper=llem_search for the least J/token over batch size and a power-limit
    interval, measured by NVML: each trial ran under the limit it was given and restored it."""
    pytest.importorskip("optuna")
    nvml, _, _, before, low = _power_limit_target()
    nvml.shutdown()
    high = min(low + 100, before.power_range_w[1])
    if high <= low:
        pytest.skip(f"GPU 0's power range {before.power_range_w} has no room for an interval")
    sweep = tmp_path / "search"
    proc = llem(
        tmp_path,
        "--multirun",
        "hydra/sweeper=llem_search",
        "hydra.sweeper.objective=energy.j_per_output_token",
        "hydra.sweeper.constraints=['latency.ttft_ms.p90 <= 60000']",
        "hydra.sweeper.budget=3",
        "device=cuda",
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "decoder.max_new_tokens=4",
        "dataset.n_prompts=4",
        "measurement.warmup=0",
        "measurement.idle_baseline_s=1",
        "measurement.min_window_s=2",
        "measurement.gpu_indices=[0]",
        "pytorch.batch_size=1,4",
        f"gpu.power_limit_w=interval({low:.0f},{high:.0f})",
        f"hydra.sweep.dir={sweep}",
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    record = json.loads((sweep / "search.json").read_text())
    trials = record["trials"]
    assert len(trials) == 3
    for t in trials:
        result = json.loads((sweep / t["dir"] / "result.json").read_text())
        assert result["energy"]["source"] in ("nvml_counter", "nvml_power")
        assert t["objective"] == pytest.approx(result["energy"]["j_per_output_token"])
        asked = float(t["knobs"]["gpu.power_limit_w"])
        assert round(low) <= asked <= round(high)
        (device,) = result["gpu"]["devices"].values()
        assert device["enforced_power_limit_w"] == pytest.approx(asked, abs=1)
        assert result["gpu"]["restored"] is True
    feasible = [t for t in trials if t["feasible"]]
    assert feasible and record["best"] == min(feasible, key=lambda t: t["objective"])["number"]
    from llem.devices.gpu_control import GpuControl
    from llem.devices.nvidia import init_nvml

    nvml = init_nvml()
    try:
        after = GpuControl(nvml).state(nvml.gpus()[0])
    finally:
        nvml.shutdown()
    assert after.power_limit_w == pytest.approx(before.power_limit_w, abs=1)

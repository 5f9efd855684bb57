"""The attribution on the step schedules real vLLM engines produce (the PyTorch engines:
attribution/test_real_engine_steps.py): vLLM offline (a batch of 4 at a time) and vLLM serving
under Poisson (open-loop) arrivals run the tiny model; their steps.csv drives the modelled power
source, measured at 10 kHz and at 10 Hz. The attribution recovers the planted J per prefill token,
J per decode token, static power and each request's energy within their bounds, and the coarse
timeline's bounds are wider.

Marked ``vllm``: skipped with the reason where vllm is not importable."""

from __future__ import annotations

from pathlib import Path

import pytest
from attribution.real_steps import (
    COARSE_HZ,
    FINE_HZ,
    assert_coarse_is_wider,
    assert_recovered,
    engine_steps,
)
from vllm_backend.vllm_helpers import (
    SMALL_ENGINE,
    output,
    run_llem,
    sweep_results,
    traffic_options,
)

pytestmark = pytest.mark.vllm

WORKLOAD = (
    "measurement.warmup=0",
    "dataset.n_prompts=8",
    "decoder.max_new_tokens=12",
    "decoder.min_new_tokens=12",
    "vllm.max_num_seqs=4",
    "slo.ttft_ms=60000",
)
# Each case a traffic option of the test's own conf/traffic/: both run in one llem process.
CASES = {
    "at_once": {"kind": "offline"},
    "poisson20": {"kind": "poisson", "rate_per_s": 20, "n_requests": 8},
}


def test_planted_costs_and_each_requests_energy_are_recovered_on_vllm_steps(
    head64_model_dir: Path, tmp_path: Path
) -> None:
    """Both cases, one ``python -m llem --multirun`` (an offline engine, then a serving one)."""
    sweep = tmp_path / "sweep"
    proc = run_llem(
        "+backend=vllm",
        "model=hf",
        f"model.name_or_path={head64_model_dir}",
        *SMALL_ENGINE,
        *WORKLOAD,
        traffic_options(tmp_path, CASES),
        f"hydra.sweep.dir={sweep}",
        multirun=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, output(proc)
    runs = sweep_results(sweep, len(CASES))
    assert [r["traffic"]["kind"] for _, r in runs] == ["offline", "poisson"]
    for run_dir, r in runs:
        case = r["traffic"]["kind"]
        steps = engine_steps(run_dir)
        assert steps and all(s.shares for s in steps), case
        # offline: the batch fills to max_num_seqs; serving: a batch that arrivals join and leave
        running = {s.running for s in steps}
        if case == "offline":
            assert max(running) == 4, running
        else:
            assert max(running) <= 4 and len(running) > 1, running
        fine = assert_recovered(steps, FINE_HZ, fine=True)
        coarse = assert_recovered(steps, COARSE_HZ, fine=False)
        assert_coarse_is_wider(fine, coarse)

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
from vllm_backend.vllm_helpers import SMALL_ENGINE, output, run_llem

# One pytest-xdist worker runs the whole module: its engine (a module fixture) starts once.
pytestmark = pytest.mark.xdist_group("vllm_attribution")

WORKLOAD = (
    "measurement.warmup=0",
    "dataset.n_prompts=8",
    "decoder.max_new_tokens=12",
    "decoder.min_new_tokens=12",
    "vllm.max_num_seqs=4",
)
CASES = {
    "offline": (),
    "serve, poisson": (
        "traffic=poisson",
        "traffic.rate_per_s=20",
        "traffic.n_requests=8",
        "slo.ttft_ms=60000",
    ),
}


@pytest.fixture(scope="module")
def runs(head64_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each case run once by ``python -m llem`` on vLLM: its run directory."""
    out = {}
    for name, overrides in CASES.items():
        run_dir = tmp_path_factory.mktemp(name.replace(" ", "_").replace(",", "")) / "run"
        proc = run_llem(
            "+backend=vllm",
            "model=hf",
            f"model.name_or_path={head64_model_dir}",
            *SMALL_ENGINE,
            *WORKLOAD,
            *overrides,
            f"hydra.run.dir={run_dir}",
        )
        assert proc.returncode == 0, output(proc)
        out[name] = run_dir
    return out


@pytest.mark.vllm
@pytest.mark.parametrize("case", list(CASES))
def test_planted_costs_and_each_requests_energy_are_recovered_on_vllm_steps(
    runs: dict[str, Path], case: str
) -> None:
    steps = engine_steps(runs[case])
    assert steps and all(s.shares for s in steps)
    # offline: the batch fills to max_num_seqs; serving: a batch that arrivals join and leave
    running = {s.running for s in steps}
    assert max(running) == 4 if case == "offline" else (max(running) <= 4 and len(running) > 1)
    fine = assert_recovered(steps, FINE_HZ, fine=True)
    coarse = assert_recovered(steps, COARSE_HZ, fine=False)
    assert_coarse_is_wider(fine, coarse)

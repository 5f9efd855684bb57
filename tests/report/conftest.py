from __future__ import annotations

from pathlib import Path

import pytest
from report import report_synth as synth


@pytest.fixture
def realistic_sweep(tmp_path: Path) -> Path:
    """batch_size 1,4,16 × quantization none,bnb-4bit × 3 repeats, with energy."""
    sweep = tmp_path / "multirun" / "2026-11-21" / "10-00-00"
    synth.write_realistic_sweep(sweep)
    return sweep


@pytest.fixture
def single_run(tmp_path: Path) -> Path:
    return synth.write_single_run(tmp_path / "outputs" / "2026-11-21" / "10-00-00")


@pytest.fixture
def cpu_sweep(tmp_path: Path) -> Path:
    """One knob (decoder), no energy anywhere (CPU)."""
    sweep = tmp_path / "cpu-sweep"
    tok = {"greedy": 12.5, "creative": 11.0}
    synth.write_sweep(
        sweep,
        {"decoder": ["greedy", "creative"]},
        lambda p: synth.ok_result(tok_s=tok[p["decoder"]], energy=False, peak_mb=None),
    )
    return sweep

"""Invalid vs condition in the report: only an untrustworthy energy leaves the means, and both
counts are shown."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from report import report_synth as synth

from llem.report.__main__ import main

CAPPED = (
    "GPU-a's clocks were held down for power (NVML's sw_power_cap) in 40% of the window's "
    "samples: a condition of the measurement, recorded in thermal.power_capped_fraction; the "
    "energy figure is valid for it."
)
SLOWED = "GPU-a was slowed down during the window (hw_slowdown): a hardware or thermal slowdown."


def _result(point: dict) -> dict:
    capped = point["pytorch.batch_size"] == 4 and point["repeat"] == 1
    slowed = point["pytorch.batch_size"] == 1 and point["repeat"] == 2
    result = synth.ok_result(
        j_tok=0.5 if capped else 0.7, valid=not slowed, problems=[SLOWED] if slowed else []
    )
    result["validity"]["checks"] = {
        "throttling": "condition" if capped else "failed" if slowed else "passed"
    }
    result["validity"]["conditions"] = [CAPPED] if capped else []
    result["thermal"].update(
        power_capped_fraction=0.4 if capped else 0.0, power_cap_reasons={}, temp_rise_c=2.0
    )
    if capped:
        result["thermal"]["power_cap_reasons"] = {"sw_power_cap": 0.4}
    return result


def test_conditions_stay_in_the_means_and_are_counted(tmp_path: Path, capsys) -> None:
    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1, 4]}, _result, repeats=3)
    assert main([str(tmp_path / "s"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    summary = pd.read_csv(tmp_path / "s" / "summary.csv")
    # the slowed run (bs=1) is left out and counted; the capped one (bs=4) stays in the mean
    assert summary["n_energy_invalid"].tolist() == [1, 0]
    assert summary["energy.j_per_output_token.n"].tolist() == [2, 3]
    assert summary["energy.j_per_output_token.mean"].tolist() == pytest.approx([0.7, 1.9 / 3])
    assert "! 1 run whose energy was judged invalid: 1 left out of every figure" in out
    assert "~ 1 run measured under recorded conditions, kept in the energy statistics" in out
    assert (
        "clocks held down for power (NVML sw_power_cap) in 1 (up to 40% of the window)"
        in " ".join(out.split())
    )
    results = pd.read_csv(tmp_path / "s" / "results.csv")
    assert results["validity.conditions"].fillna("").tolist().count(CAPPED) == 1
    assert results["thermal.power_capped_fraction"].max() == pytest.approx(0.4)


def test_no_conditions_no_note(tmp_path: Path, capsys) -> None:
    synth.write_sweep(tmp_path / "s", {"pytorch.batch_size": [1]}, lambda p: synth.ok_result())
    assert main([str(tmp_path / "s"), "--no-plots"]) == 0
    assert "recorded conditions" not in capsys.readouterr().out

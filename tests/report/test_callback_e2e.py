"""The report callback at the end of a real 2-point ``python -m llem --multirun``, tiny model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_report_written_at_the_end_of_a_real_multirun(tiny_model_dir: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("DISPLAY", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "llem",
            "--multirun",
            "model=hf",
            f"model.name_or_path={tiny_model_dir}",
            "decoder.max_new_tokens=4",
            "dataset.n_prompts=2",
            "pytorch.batch_size=1,2",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = pd.read_csv(sweep / "results.csv")
    assert results["pytorch.batch_size"].tolist() == [1, 2]
    assert results["status"].tolist() == ["ok", "ok"]
    assert results["throughput.output_tokens_per_s"].notna().all()
    assert (sweep / "results.parquet").is_file()
    summary = pd.read_csv(sweep / "summary.csv")
    assert len(summary) == 2
    assert (sweep / "plots" / "tokens_per_s_vs_pytorch.batch_size.png").is_file()
    assert "batch_size" in proc.stdout and "tok/s" in proc.stdout

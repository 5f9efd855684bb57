from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from hydra.experimental.callback import Callback
from omegaconf import OmegaConf

from llem.report.callback import ReportCallback


@pytest.mark.slow
def test_callback_builds_the_report_for_the_sweep_dir(realistic_sweep: Path, capsys) -> None:
    cb = ReportCallback()
    assert isinstance(cb, Callback)
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(realistic_sweep)}}})
    cb.on_multirun_end(config, config_name="config")
    assert len(pd.read_csv(realistic_sweep / "results.csv")) == 18
    assert len(pd.read_csv(realistic_sweep / "summary.csv")) == 6
    assert (realistic_sweep / "plots" / "pareto.png").is_file()
    assert "batch_size  quantization" in capsys.readouterr().out


def test_the_sweeps_own_report_says_why_j_per_token_is_blank(cpu_sweep: Path, capsys) -> None:
    """Not only a later ``python -m llem.report`` on stderr: the report printed at the end of the
    sweep says why J/tok is blank and why there are no J/token plots."""
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(cpu_sweep)}}})
    ReportCallback(worker=False).on_multirun_end(config)
    out = " ".join(capsys.readouterr().out.split())
    assert "decoder" in out and "J/tok" in out
    assert (
        "J/tok is blank and no J/token plot or pareto.png is drawn: no run measured energy "
        "(no NVIDIA GPU (device is cpu))" in out
    )


def test_callback_never_raises(tmp_path: Path, caplog) -> None:
    cb = ReportCallback(print_table=False)
    (tmp_path / "empty").mkdir()
    with caplog.at_level(logging.WARNING, logger="llem.report.callback"):
        cb.on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "empty")}}}))
        cb.on_multirun_end(OmegaConf.create({}))  # no hydra node at all
        cb.on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": "${oc.env:NOPE_XYZ}"}}}))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert "no runs found" in messages[0] and "python -m llem.report" in messages[0]


APP = """
import json
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig


@hydra.main(version_base="1.3", config_path=".", config_name="config")
def app(cfg):
    out = Path(HydraConfig.get().runtime.output_dir)
    result = {"schema_version": 2, "status": "ok", "config_hash": f"h{cfg.batch_size}",
              "throughput": {"output_tokens_per_s": 10.0 * cfg.batch_size},
              "energy": {"source": "unavailable", "j_per_output_token": None}}
    (out / "result.json").write_text(json.dumps(result))


app()
"""

CONFIG = """
batch_size: 1
hydra:
  callbacks:
    report:
      _target_: llem.report.callback.ReportCallback
"""


@pytest.mark.slow
def test_callback_in_a_real_hydra_multirun(tmp_path: Path) -> None:
    """Hydra instantiates the callback and it finds the sweep dir (the default ${now:} one)."""
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    (tmp_path / "config.yaml").write_text(textwrap.dedent(CONFIG))
    proc = subprocess.run(
        [sys.executable, "app.py", "--multirun", "batch_size=4,1,16"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    sweeps = [p.parent for p in (tmp_path / "multirun").glob("*/*/multirun.yaml")]
    assert len(sweeps) == 1
    results = pd.read_csv(sweeps[0] / "results.csv")
    assert results["batch_size"].tolist() == [1, 4, 16]
    assert results["throughput.output_tokens_per_s"].tolist() == [10.0, 40.0, 160.0]
    assert (sweeps[0] / "summary.csv").is_file()
    assert (sweeps[0] / "plots" / "tokens_per_s_vs_batch_size.png").is_file()
    assert "batch_size  tok/s" in proc.stdout

"""Result schema 4: the gpu section, and files of schema 3 read with it null and explained."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from llem.result import RunResult
from llem.result.gpu import GpuSection
from llem.result.migrate import SCHEMA_VERSION

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_schema_3_file_loads_with_gpu_null_and_the_reason(tmp_path: Path) -> None:
    """A real result.json written by llem at schema 3 (main before this branch, tiny model)."""
    shutil.copy(DATA / "result_v3_tiny_run.json", tmp_path / "result.json")
    assert json.loads((tmp_path / "result.json").read_text())["schema_version"] == 3
    r = RunResult.read(tmp_path)
    assert r is not None and r.schema_version == SCHEMA_VERSION == 8
    assert r.gpu is None
    assert r.null_reasons["gpu"] == "not recorded before result schema 4"
    assert r.workload.n_prompts == 2


def test_the_gpu_section_round_trips(tmp_path: Path) -> None:
    r = RunResult(status="ok")
    r.gpu = GpuSection(
        requested_power_limit_w=300.0,
        requested_sm_clock_mhz=[1000, 1410],
        devices={"GPU-a": {"power_limit_w_before": 700.0, "enforced_power_limit_w": 300.0}},
        restored=True,
    )
    r.write(tmp_path)
    back = RunResult.read(tmp_path)
    assert back is not None and back.gpu == r.gpu

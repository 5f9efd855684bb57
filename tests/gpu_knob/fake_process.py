"""Helpers of the subprocess tests: a llem process over the NVML test double (fake_site)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from llem.testing.cli import llem_env

SITE = Path(__file__).resolve().parent / "fake_site"
ORIGINAL_MW = 450_000


def gpu_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = llem_env()
    env["PYTHONPATH"] = os.pathsep.join([str(SITE), env["PYTHONPATH"]])
    env["LLEM_CACHE_DIR"] = str(tmp_path / "cache")
    env["LLEM_TEST_FAKE_NVML_STATE"] = str(tmp_path / "gpu.json")
    env.update(extra)
    return env


def gpu_state(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "gpu.json").read_text())


def start_gpu(tmp_path: Path) -> None:
    state = dict(power_limit_mw=ORIGINAL_MW, sm_lock=None, memory_lock=None, original_limit_mw=None)
    (tmp_path / "gpu.json").write_text(json.dumps({**state, "changes": []}))


def restore_records(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "gpu_restore").glob("*.json"))

"""Running llem's command line against the cluster (helpers for the cluster tests)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def llem_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.pop("DISPLAY", None)
    return env


def llem_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "llem", "--multirun", *args]


def slurm_args(partition: str) -> list[str]:
    """A small CPU job per point: one core, 2 GB, a 10-minute limit."""
    return [
        "hydra/launcher=slurm_cpu",
        f"hydra.launcher.partition={partition}",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=2",
        "hydra.launcher.timeout_min=10",
    ]

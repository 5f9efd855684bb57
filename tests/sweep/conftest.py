"""Helpers for sweep tests: the real ``python -m llem --multirun`` on the tiny random model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from llem.testing import cli, forked_cli
from llem.testing.cli import llem_env as llem_env

REPO = Path(__file__).resolve().parents[2]

# A point on the tiny model in well under a second once the model is loaded.
FAST = ["decoder.max_new_tokens=2", "dataset.n_prompts=2", "measurement.warmup=0"]
NO_REPORT = "~hydra.callbacks.report"  # the report has its own tests; skipping it saves a second


def llem_cmd(*args: str) -> list[str]:
    return cli.llem_command(*args, multirun=True)


def run_llem(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return forked_cli.run_llem(*args, multirun=True, timeout=timeout)


def result(sweep: Path, index: int) -> dict[str, Any]:
    return json.loads((sweep / str(index) / "result.json").read_text())


def plan(sweep: Path) -> dict[str, Any]:
    return json.loads((sweep / "sweep_plan.json").read_text())


def output(proc: subprocess.CompletedProcess) -> str:
    return f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


@pytest.fixture()
def tiny(tiny_model_dir: Path) -> list[str]:
    """Overrides selecting the tiny model."""
    return ["model=hf", f"model.name_or_path={tiny_model_dir}"]

"""A sweep over gpu.power_limit_w steps through the limits (the real dry-run plan, over the NVML
test double in the subprocess)."""

from __future__ import annotations

import re
import subprocess

import pytest

from gpu_knob.fake_process import gpu_env, start_gpu
from llem.config.schema import SweepOrder
from llem.sweep.plan import Point
from llem.sweep.run_order import order_points
from llem.testing.cli import llem_command


def _limits_in_run_order(stdout: str) -> list[tuple[str, str]]:
    rows = re.findall(r"^\s+\d+\. #\d+ \[(.*)\] pre-flight ok$", stdout, flags=re.M)
    return [
        (re.search(r"gpu.power_limit_w=(\d+)", r).group(1), re.search(r"repeat=(\d)", r).group(1))
        for r in rows
    ]


@pytest.mark.slow
def test_a_dry_run_plan_runs_the_limits_in_order_rising_then_falling(tmp_path, tiny_model_dir):
    start_gpu(tmp_path)
    proc = subprocess.run(
        llem_command(
            "dry_run=true",
            "model=hf",
            f"model.name_or_path={tiny_model_dir}",
            "sweep.order=interleave",
            "gpu.power_limit_w=700,200,400",
            "repeat=0,1",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            multirun=True,
        ),
        cwd=tmp_path,
        env=gpu_env(tmp_path),
        text=True,
        capture_output=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _limits_in_run_order(proc.stdout) == [
        ("200", "0"),
        ("400", "0"),
        ("700", "0"),
        ("700", "1"),
        ("400", "1"),
        ("200", "1"),
    ]


def test_points_without_a_limit_and_other_knobs_keep_their_order() -> None:
    points = [
        Point(0, ["a"], load_key="m", power_limit_w=700.0),
        Point(1, ["b"], load_key="m", power_limit_w=200.0),
        Point(2, ["c"], load_key="m"),
        Point(3, ["d"], load_key="m", power_limit_w=200.0),
        Point(4, ["e"], load_key="other"),
    ]
    assert order_points(points, SweepOrder.grouped, 0) == [1, 3, 0, 2, 4]

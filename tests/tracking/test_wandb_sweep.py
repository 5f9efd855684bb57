"""``+tracking=wandb tracking.mode=offline`` on a real 2-point grid, and ``llem-report
--to-wandb`` on a planted sweep: runs written under the sweep directory, read back through wandb's
own reader, nothing connecting to W&B's server, the API key written nowhere."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from llem.report.__main__ import main as report_main
from llem.testing.cli import output, run_llem

from .wandb_files import SECRET, Listener, grep, plant_sweep, runs

pytestmark = [
    pytest.mark.wandb,
    pytest.mark.skipif(
        importlib.util.find_spec("wandb") is None,
        reason="needs wandb (pip install 'llem[tracking]')",
    ),
]

FAST = [
    "decoder.max_new_tokens=2",
    "dataset.n_prompts=2",
    "measurement.warmup=0",
    "device=cpu",
    "measurement.energy=none",
    "~hydra.callbacks.report",  # the report has its own tests
]


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch):
    listener = Listener()
    monkeypatch.setenv("WANDB_BASE_URL", listener.url)
    monkeypatch.setenv("WANDB_API_KEY", SECRET)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    yield listener
    listener.close()


@pytest.mark.slow
def test_a_grid_offline(no_network: Listener, tiny_model_dir: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = run_llem(
        *("model=hf", f"model.name_or_path={tiny_model_dir}", *FAST, "pytorch.batch_size=1,2"),
        *(f"hydra.sweep.dir={sweep}", "+tracking=wandb", "tracking.project=llem-test"),
        "tracking.mode=offline",
        multirun=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, output(proc)
    assert no_network.connections == 0
    state = json.loads((sweep / "tracking.json").read_text())["wandb"]
    logged = runs(sweep / "wandb")
    assert {r["run"]["run_group"] for r in logged} == {state["group"]}
    points = {r["run"]["run_id"]: r for r in logged if r["run"]["job_type"] == "point"}
    assert sorted(points) == sorted(run_id for run_id, *_ in state["points"].values())
    for index, (run_id, *_) in state["points"].items():
        result = json.loads((sweep / index / "result.json").read_text())
        summary = points[run_id]["summary"]
        assert (
            summary["throughput.output_tokens_per_s"] == result["throughput"]["output_tokens_per_s"]
        )
        assert "energy.total_j" not in summary
        assert points[run_id]["config"]["config"]["pytorch"]["batch_size"] == int(index) + 1
        # the engine's steps.csv as a throughput history (the point's timing is the run's own)
        decode = [r for r in points[run_id]["history"] if "timeline.decode_tokens_per_s" in r]
        assert decode and decode[0]["_step"] == 0
    assert [r["run"]["job_type"] for r in logged].count("sweep") == 1
    assert grep(SECRET, sweep) == []


def test_to_wandb_logs_a_finished_sweep_once(
    no_network: Listener, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    sweep = tmp_path / "sweep"
    plant_sweep(sweep, [1, 4])
    argv = ["--to-wandb", str(sweep), "--project", "later", "--wandb-mode", "offline"]
    assert report_main(argv) == 0
    assert "logged 2 point(s)" in capsys.readouterr().out
    assert report_main(["--to-wandb", str(sweep)]) == 0  # project and mode from tracking.json
    assert "logged 0 point(s)" in capsys.readouterr().out
    assert no_network.connections == 0
    logged = runs(sweep / "wandb")
    assert {r["run"]["project"] for r in logged} == {"later"}
    assert len({r["run"]["run_id"] for r in logged if r["run"]["job_type"] == "point"}) == 2


def test_to_wandb_without_a_project_is_one_line(tmp_path: Path, capsys) -> None:
    plant_sweep(tmp_path / "sweep", [1])
    assert report_main(["--to-wandb", str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "tracking.project" in lines[0] and "Traceback" not in err, err

"""Sweeps logged to a real MLflow server, checked through MLflow's own client: a 2-point grid
(a parent, a child per point), the grid resumed and grown (the same parent, no point twice), a
server stopped mid-sweep (the sweep finishes; ``llem-report --to-mlflow`` fills the gap), and a
planted secret found nowhere in the sweep directory or the server's store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from llem.testing.cli import llem_env, output, run_llem

from .conftest import Forwarder

pytestmark = [pytest.mark.mlflow, pytest.mark.slow]  # sweeps through a real server: minutes

SECRET = "planted-secret-7f3a9c"
FAST = [
    "decoder.max_new_tokens=2",
    "dataset.n_prompts=2",
    "measurement.warmup=0",
    "device=cpu",
    "measurement.energy=none",
    "~hydra.callbacks.report",  # the report has its own tests; summary.csv is planted instead
]


def _sweep(model: Path, sweep: Path, uri: str, grid: str) -> subprocess.CompletedProcess:
    env = {"MLFLOW_TRACKING_TOKEN": SECRET, "MLFLOW_TRACKING_USERNAME": "alice"}
    env["MLFLOW_TRACKING_PASSWORD"] = SECRET
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return run_llem(
            *("model=hf", f"model.name_or_path={model}", *FAST, f"pytorch.batch_size={grid}"),
            *(f"hydra.sweep.dir={sweep}", "+tracking=mlflow", f"tracking.uri={uri}"),
            f"tracking.experiment={sweep.parent.name}",
            multirun=True,
            cwd=sweep.parent,
            timeout=600,
        )
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def _runs(uri: str, sweep: Path) -> tuple[Any, list[Any], list[Any]]:
    """The client, the parent runs and the child runs of the experiment of ``sweep``'s test."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(sweep.parent.name)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("llem.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("llem.kind") == "point"]
    return client, parents, children


def _by_point(children: list[Any], sweep: Path) -> dict[str, Any]:
    parent = json.loads((sweep / "tracking.json").read_text())["mlflow"]["run_id"]
    assert all(c.data.tags["mlflow.parentRunId"] == parent for c in children)
    return {c.data.tags["llem.point"]: c for c in children}


def _check_child(client: Any, child: Any, point_dir: Path) -> None:
    result = json.loads((point_dir / "result.json").read_text())
    m, p, t = child.data.metrics, child.data.params, child.data.tags
    assert m["workload.output_tokens"] == result["workload"]["output_tokens"]
    assert m["throughput.output_tokens_per_s"] == result["throughput"]["output_tokens_per_s"]
    assert m["latency.ttft_ms.p50"] == result["latency"]["ttft_ms"]["p50"]
    assert "energy.total_j" not in m  # null (energy=none), never a 0
    assert t["null.energy.total_j"] == result["null_reasons"]["energy.total_j"]
    assert t["llem.status"] == "ok" and t["llem.energy_valid"] == "unknown"
    batch = str(result["config"]["pytorch"]["batch_size"])
    assert p["override.pytorch.batch_size"] == batch == p["config.pytorch.batch_size"]
    files = [n for n in ("plots", "requests.jsonl", "result.json") if (point_dir / n).exists()]
    assert [a.path for a in client.list_artifacts(child.info.run_id)] == files
    assert child.info.status == "FINISHED"


def _grep(secret: str, *roots: Path) -> list[str]:
    found = []
    for root in roots:
        for f in root.rglob("*"):
            if f.is_file() and secret.encode() in f.read_bytes():
                found.append(str(f))
    return found


def test_a_grid_then_its_resumed_grid(mlflow_server, tiny_model_dir: Path, tmp_path: Path) -> None:
    uri, sweep = mlflow_server["uri"], tmp_path / "sweep"
    proc = _sweep(tiny_model_dir, sweep, uri, "1,2")
    assert proc.returncode == 0, output(proc)
    client, parents, children = _runs(uri, sweep)
    (parent,) = parents
    assert parent.data.params["swept"] == "pytorch.batch_size"
    assert parent.data.params["points"] == "2" and parent.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"sweep_plan.json"}
    points = _by_point(children, sweep)
    assert sorted(points) == ["0", "1"]
    for index, child in points.items():
        _check_child(client, child, sweep / index)
    assert _grep(SECRET, sweep, mlflow_server["store"]) == []

    # resumed and grown by one point: the same parent; the two logged points are not logged again
    (sweep / "summary.csv").write_text("planted summary\n")
    proc = _sweep(tiny_model_dir, sweep, uri, "1,2,4")
    assert proc.returncode == 0, output(proc)
    client, parents, children = _runs(uri, sweep)
    assert [p.info.run_id for p in parents] == [parent.info.run_id]
    again = _by_point(children, sweep)
    assert sorted(again) == ["0", "1", "2"]
    assert {k: again[k].info.run_id for k in points} == {k: points[k].info.run_id for k in points}
    for index in ("0", "1"):
        history = client.get_metric_history(again[index].info.run_id, "duration_s")
        assert len(history) == 1, f"point {index} logged {len(history)} times"
    _check_child(client, again["2"], sweep / "2")
    assert "summary.csv" in {a.path for a in client.list_artifacts(parent.info.run_id)}


def test_a_points_files_timeline_and_a_search_best(mlflow_server, tmp_path: Path) -> None:
    """A planted sweep logged by the tracker itself: the point's requests.jsonl and plots/, its
    timeline and the engine's throughput as metric histories at the planted steps (an unreadable
    reading absent, not 0; a point without steps.csv has no throughput, its reason a tag), the
    search's best as the parent's tags and search.json; logged again, nothing is twice; a
    re-run point's child gets the new result."""
    from llem.tracking.upload import MlflowTracker

    from .wandb_files import (
        THROUGHPUT,
        TIMELINE,
        plant_point_files,
        plant_result,
        plant_search,
        plant_sweep,
    )

    uri, sweep = mlflow_server["uri"], tmp_path / "sweep"
    plant_sweep(sweep, [1, 4])
    plant_point_files(sweep / "0")
    plant_search(sweep)
    assert MlflowTracker(uri, tmp_path.name, 30).end_sweep(sweep) == (2, 2)
    client, (parent,), children = _runs(uri, sweep)
    points = _by_point(children, sweep)
    run_id = points["0"].info.run_id
    files = {a.path for a in client.list_artifacts(run_id)}
    assert files == {"result.json", "requests.jsonl", "plots"}
    assert [a.path for a in client.list_artifacts(run_id, "plots")] == ["plots/timeline.png"]
    for key, planted in {**TIMELINE, **THROUGHPUT}.items():
        history = sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))
        assert history == planted, key
    assert not client.get_metric_history(points["1"].info.run_id, "timeline.power_w")
    no_steps = points["1"].data.tags["null.timeline.decode_tokens_per_s"]
    assert no_steps == "the point has no steps.csv"
    assert not client.get_metric_history(points["1"].info.run_id, "timeline.decode_tokens_per_s")
    tags = parent.data.tags
    assert tags["best.pytorch.batch_size"] == "4" and tags["search.best"] == "#1"
    assert tags["search.confirmations"] == "2" and tags["search.best_runs"] == "3"
    assert "search.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}

    plant_result(sweep / "1", 4, "2026-11-28T12:00:00")  # point 1 re-ran since, with steps.csv
    plant_point_files(sweep / "1")
    (sweep / "1" / "result.json").write_text(
        (sweep / "1" / "result.json").read_text().replace('"p50": 14.0', '"p50": 15.0')
    )
    assert MlflowTracker(uri, tmp_path.name, 30).end_sweep(sweep) == (1, 2)
    client, _, children = _runs(uri, sweep)
    again = _by_point(children, sweep)
    assert {k: c.info.run_id for k, c in again.items()} == {
        k: c.info.run_id for k, c in points.items()
    }
    assert again["1"].data.metrics["latency.ttft_ms.p50"] == 15.0
    # its throughput now has a history: the earlier attempt's reason for none is gone
    assert not [k for k in again["1"].data.tags if k.startswith("null.timeline.")]
    decode = client.get_metric_history(again["1"].info.run_id, "timeline.decode_tokens_per_s")
    assert sorted((m.step, m.value) for m in decode) == THROUGHPUT["timeline.decode_tokens_per_s"]
    assert again["1"].data.tags["null.energy.total_j"]  # still null: its reason stays
    assert len(client.get_metric_history(run_id, "timeline.power_w")) == 2  # not logged twice


def test_a_server_stopped_mid_sweep(mlflow_server, tiny_model_dir: Path, tmp_path: Path) -> None:
    uri, sweep = mlflow_server["uri"], tmp_path / "sweep"
    forwarder = Forwarder(uri, stop_after="/runs/update")  # down once point #0 is logged
    proc = _sweep(tiny_model_dir, sweep, forwarder.uri, "8,16")
    assert proc.returncode == 0, output(proc)
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "tracking: MLflow at" in ln]
    assert len(said) == 1 and "llem-report --to-mlflow" in said[0], said
    assert forwarder.stopping.is_set()
    _, _, children = _runs(uri, sweep)
    assert sorted(_by_point(children, sweep)) == ["0"]

    upload = subprocess.run(
        [sys.executable, "-m", "llem.report", "--to-mlflow", str(sweep), "--tracking-uri", uri,
         "--experiment", tmp_path.name],
        env=llem_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert upload.returncode == 0, output(upload)
    client, parents, children = _runs(uri, sweep)
    points = _by_point(children, sweep)
    assert sorted(points) == ["0", "1"]
    for index, child in points.items():
        _check_child(client, child, sweep / index)


def test_a_single_run_is_one_run(mlflow_server, tiny_model_dir: Path, tmp_path: Path) -> None:
    uri, run_dir = mlflow_server["uri"], tmp_path / "run"
    proc = run_llem(
        *("model=hf", f"model.name_or_path={tiny_model_dir}", *FAST[:-1], "pytorch.batch_size=2"),
        *(f"hydra.run.dir={run_dir}", "+tracking=mlflow", f"tracking.uri={uri}"),
        f"tracking.experiment={tmp_path.name}",
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, output(proc)
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(tmp_path.name)
    (run,) = client.search_runs([exp.experiment_id])
    assert "mlflow.parentRunId" not in run.data.tags
    _check_child(client, run, run_dir)
    # a later upload of the same directory logs nothing twice
    upload = subprocess.run(
        [sys.executable, "-m", "llem.report", "--to-mlflow", str(run_dir)],
        env=llem_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert upload.returncode == 0 and "already logged" in upload.stdout, output(upload)
    assert len(client.search_runs([exp.experiment_id])) == 1


def test_the_client_leaves_no_thread_running_between_points(mlflow_server) -> None:
    """A point's window starts after the tracker's calls return: none may leave a thread."""
    import threading

    from llem.tracking.mlflow_runs import MlflowRuns

    before = {t.ident for t in threading.enumerate()}
    runs = MlflowRuns(mlflow_server["uri"], "threads", timeout_s=5)
    run_id = runs.create("a", {"llem.kind": "point"})
    runs.log(run_id, {"duration_s": 1.0}, {"p": "1"}, {"t": "v"})
    runs.end(run_id, "FINISHED")
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []

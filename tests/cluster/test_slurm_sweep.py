"""A real llem sweep through a real SLURM cluster (hydra-submitit-launcher, ``slurm_cpu``)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from llem.testing.cli import REPO, llem_command, llem_env, output

pytestmark = pytest.mark.cluster

FAST = ["decoder.max_new_tokens=2", "dataset.n_prompts=2", "measurement.warmup=0"]


def slurm_args(partition: str) -> list[str]:
    """A small CPU job per point: one core, 2 GB, a 10-minute limit."""
    return [
        "hydra/launcher=slurm_cpu",
        f"hydra.launcher.partition={partition}",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=2",
        "hydra.launcher.timeout_min=10",
    ]


def llem_cmd(*args: str) -> list[str]:
    return llem_command(*args, multirun=True)


def run_sweep(*args: str) -> subprocess.CompletedProcess[str]:
    """``llem --multirun ARGS`` to its end (bounded), its output captured."""
    return subprocess.run(
        llem_cmd(*args), cwd=REPO, env=llem_env(), capture_output=True, text=True, timeout=480
    )


@pytest.fixture()
def readable_model(cluster_model: Path) -> list[str]:
    return ["model=hf", f"model.name_or_path={cluster_model}"]


@pytest.fixture()
def sweep(shared_dir: Path, request: pytest.FixtureRequest) -> Path:
    return shared_dir / request.node.name


def result(sweep: Path, index: int) -> dict[str, Any]:
    return json.loads((sweep / str(index) / "result.json").read_text())


def node_names(partition: str) -> list[str]:
    out = subprocess.run(
        ["sinfo", "-h", "-N", "-p", partition, "-o", "%N"], capture_output=True, text=True
    )
    return out.stdout.split()


def test_a_sweep_runs_through_slurm_and_records_its_jobs(
    slurm: str, readable_model: list[str], sweep: Path
) -> None:
    proc = run_sweep(
        *slurm_args(slurm),
        *readable_model,
        *FAST,
        "pytorch.batch_size=1,2",
        f"hydra.sweep.dir={sweep}",
    )
    assert proc.returncode == 0, output(proc)
    results = [result(sweep, i) for i in (0, 1)]
    assert [r["status"] for r in results] == ["ok", "ok"], output(proc)
    ids = [r["lifecycle"]["slurm_job_id"] for r in results]
    assert all(i and i.isdigit() for i in ids) and len(set(ids)) == 2
    assert {r["lifecycle"]["node"] for r in results} <= set(node_names(slurm))
    assert all(r["lifecycle"]["node"] for r in results)
    # each job left its logs where the launcher put them, and the report came at the end
    assert len(list((sweep / ".submitit").glob("*/*_log.out"))) == 2
    assert "2 ok · 0 failed · 0 skipped" in proc.stdout
    table = (sweep / "results.csv").read_text()
    assert "lifecycle.slurm_job_id" in table.splitlines()[0]
    assert all(i in table for i in ids)


def _job_of_point(sweep: Path, task: int, deadline: float) -> str:
    """The id of the array task that runs the ``task``-th launched point, once submitted."""
    while time.monotonic() < deadline:
        found = list((sweep / ".submitit").glob(f"*_{task}/*_{task}_submitted.pkl"))
        if found:
            return found[0].parent.name
        time.sleep(0.5)
    raise AssertionError("the job was never submitted")


def _state(job_id: str) -> str | None:
    out = subprocess.run(
        ["squeue", "--array", "-t", "all", "-h", "-j", job_id.split("_")[0], "-o", "%i %T"],
        capture_output=True,
        text=True,
    ).stdout
    states = dict(line.split() for line in out.splitlines() if line.strip())
    return states.get(job_id)


def test_a_cancelled_job_fails_its_point_the_rest_finish_and_resume_reruns_only_it(
    slurm: str, readable_model: list[str], sweep: Path
) -> None:
    # point #1 waits 30 s before measuring: time to cancel its job while it runs
    args = llem_cmd(
        *slurm_args(slurm),
        *readable_model,
        *FAST,
        "measurement.cooldown_s=0,30",
        "~hydra.callbacks.report",
        f"hydra.sweep.dir={sweep}",
    )
    first = subprocess.Popen(
        args, cwd=REPO, env=llem_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        job = _job_of_point(sweep, 1, time.monotonic() + 120)
        deadline = time.monotonic() + 180
        while _state(job) != "RUNNING":
            assert time.monotonic() < deadline, f"job {job} never ran"
            time.sleep(0.5)
        subprocess.run(["scancel", job], check=True)
        cancelled_at = time.monotonic()
        stdout, stderr = first.communicate(timeout=180)  # bounded: never waits forever
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    took = time.monotonic() - cancelled_at
    first_out = f"--- stdout\n{stdout[-4000:]}\n--- stderr\n{stderr[-4000:]}"
    assert first.returncode == 4, first_out
    assert took < 120, f"the sweep took {took:.0f} s to notice the cancelled job"
    lost = result(sweep, 1)
    assert lost["status"] == "failed"
    assert lost["error"]["type"] == "SlurmJobLost"
    assert job in lost["error"]["message"] and "CANCELLED" in lost["error"]["message"]
    assert ".submitit" in lost["error"]["hint"]
    assert lost["lifecycle"]["slurm_job_id"]
    assert result(sweep, 0)["status"] == "ok"  # the other point finished
    assert "1 ok · 1 failed · 0 skipped" in stdout
    ok_bytes = (sweep / "0" / "result.json").read_bytes()

    second = subprocess.run(
        args, cwd=REPO, env=llem_env(), capture_output=True, text=True, timeout=480
    )
    assert second.returncode == 0, output(second)
    assert "1 already done" in second.stdout and "1 to run" in second.stdout
    assert (sweep / "0" / "result.json").read_bytes() == ok_bytes  # not run again
    rerun = result(sweep, 1)
    assert rerun["status"] == "ok"
    assert rerun["lifecycle"]["slurm_job_id"] != lost["lifecycle"]["slurm_job_id"]


def test_a_search_runs_its_trials_as_slurm_jobs_two_at_a_time(
    slurm: str, readable_model: list[str], sweep: Path
) -> None:
    """hydra/sweeper=llem_search through the cluster launcher: the search asks for two trials at
    once (max_batch_size=2), each runs as its own job, search.json and the report's search section
    come from their results."""
    pytest.importorskip("optuna")
    proc = run_sweep(
        "hydra/sweeper=llem_search",
        "hydra.sweeper.objective=throughput.output_tokens_per_s",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.constraints=['latency.ttft_ms.p90 <= 60000']",
        "hydra.sweeper.budget=2",
        "hydra.sweeper.max_batch_size=2",
        *slurm_args(slurm),
        *readable_model,
        *FAST,
        "pytorch.batch_size=1,2,4",
        f"hydra.sweep.dir={sweep}",
    )
    assert proc.returncode == 0, output(proc)
    record = json.loads((sweep / "search.json").read_text())
    trials = record["trials"]
    assert [t["dir"] for t in trials] == ["0", "1"], output(proc)
    assert "budget of 2 trials was spent" in record["stopped_because"]
    results = [result(sweep, int(t["dir"])) for t in trials]
    assert [r["status"] for r in results] == ["ok", "ok"]
    ids = [r["lifecycle"]["slurm_job_id"] for r in results]
    assert all(i and i.isdigit() for i in ids) and len(set(ids)) == 2
    # both were submitted together: one array of two tasks
    logs = list((sweep / ".submitit").glob("*/*_log.out"))
    assert len(logs) == 2 and len({p.parent.name.split("_")[0] for p in logs}) == 1
    for t, r in zip(trials, results, strict=True):
        assert r["config"]["pytorch"]["batch_size"] == int(t["knobs"]["pytorch.batch_size"])
        assert t["objective"] == pytest.approx(r["throughput"]["output_tokens_per_s"])
        assert t["feasible"]
    best = max(trials, key=lambda t: t["objective"])
    assert record["best"] == best["number"]
    assert "best feasible configuration: #" + best["dir"] in proc.stdout
    assert (sweep / "search_trials.csv").exists()

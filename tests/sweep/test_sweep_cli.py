"""The real ``python -m llem --multirun`` in a subprocess: skipping, failures, resume, Ctrl-C,
and process-per-point launchers (submitit_local, joblib)."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import FAST, NO_REPORT, REPO, llem_cmd, llem_env, output, plan, result, run_llem


def read_result(run_dir: Path) -> dict | None:
    """result.json as written on disk (None when absent)."""
    f = Path(run_dir) / "result.json"
    return json.loads(f.read_text()) if f.exists() else None


@pytest.mark.slow
def test_invalid_combinations_are_skipped_with_reasons_and_the_rest_run(
    tiny: list[str], tmp_path: Path
) -> None:
    sweep = tmp_path / "sweep"
    proc = run_llem(
        *tiny,
        *FAST,
        "decoder.max_new_tokens=4",
        "decoder.min_new_tokens=1,2,8",
        "sweep.reuse_model=false",
        f"hydra.sweep.dir={sweep}",
    )
    assert proc.returncode == 0, output(proc)  # skipped points are not failures
    assert "sweep plan: 3 points · 1 skipped" in proc.stdout
    skipped = result(sweep, 2)
    assert skipped["status"] == "skipped"
    assert skipped["error"]["type"] == "ConfigError"
    assert "min_new_tokens" in skipped["error"]["message"]
    assert "max_new_tokens" in skipped["error"]["message"]
    for i in (0, 1):
        ok = result(sweep, i)
        assert ok["status"] == "ok", ok["error"]
        assert ok["lifecycle"]["model_reused"] is False  # sweep.reuse_model=false
    assert "2 ok · 0 failed · 1 skipped" in proc.stdout
    assert (sweep / "results.csv").is_file()  # the report still runs at the end


@pytest.mark.slow
def test_a_failing_point_does_not_stop_the_sweep_and_resume_reruns_only_it(
    tiny: list[str], tmp_path: Path, tiny_model_dir: Path
) -> None:
    sweep = tmp_path / "sweep"
    later = tmp_path / "model-copied-later"
    args = [
        "model=hf",
        f"model.name_or_path={tiny_model_dir},{later}",
        *FAST,
        NO_REPORT,
        f"hydra.sweep.dir={sweep}",
    ]
    first = run_llem(*args)
    assert first.returncode == 4, output(first)
    ok, failed = result(sweep, 0), result(sweep, 1)
    assert ok["status"] == "ok"
    assert failed["status"] == "failed"
    assert failed["error"]["type"] == "PreflightError"
    assert str(later) in failed["error"]["message"] and failed["error"]["hint"]
    assert "1 ok · 1 failed · 0 skipped" in first.stdout
    assert f"failed #1 [model.name_or_path={later}]" in first.stdout
    ok_bytes = (sweep / "0" / "result.json").read_bytes()

    shutil.copytree(tiny_model_dir, later)  # fix the cause, run the same command again
    second = run_llem(*args)
    assert second.returncode == 0, output(second)
    assert "1 already done" in second.stdout and "1 to run" in second.stdout
    assert (sweep / "0" / "result.json").read_bytes() == ok_bytes  # not run again
    rerun = result(sweep, 1)
    assert rerun["status"] == "ok"
    assert rerun["started_at"] >= failed["started_at"]
    recorded = plan(sweep)
    assert recorded["run_order"] == [1]
    assert [p["status"] for p in recorded["points"]] == ["done", "pending"]


@pytest.mark.slow
def test_ctrl_c_keeps_finished_points_and_the_sweep_resumes(
    tiny: list[str], tmp_path: Path
) -> None:
    sweep = tmp_path / "sweep"
    args = [
        *tiny,
        "dataset.n_prompts=2",
        "measurement.warmup=0",
        "decoder.max_new_tokens=200",
        "decoder.min_new_tokens=200",
        "pytorch.batch_size=1,2,3,4",
        NO_REPORT,
        f"hydra.sweep.dir={sweep}",
    ]
    proc = subprocess.Popen(
        llem_cmd(*args),
        cwd=REPO,
        env=llem_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell that starts a job in the background makes it ignore SIGINT, and the child
        # would inherit that: give it the default disposition, as a terminal's Ctrl-C would find.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            first = read_result(sweep / "0")
            if first and first.get("status") == "ok":
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        time.sleep(0.3)  # into the next point
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout[-3000:] + stderr[-3000:]
    resume = shlex.split(stderr.split("resume with: ", 1)[1])  # the whole command, pasteable
    assert resume[:4] == ["python", "-m", "llem", "--multirun"]
    assert resume[-1] == f"hydra.sweep.dir={sweep}"
    assert "sweep interrupted after" in stdout

    results = {i: read_result(sweep / str(i)) for i in range(4)}
    assert results[0]["status"] == "ok"
    assert any(r is None or r["status"] != "ok" for r in results.values())
    for r in results.values():
        if r is None:
            continue
        if r["status"] == "ok":  # only finished points are ok, with their measurements
            assert r["throughput"]["output_tokens_per_s"] > 0
        else:
            assert r["status"] == "failed" and r["error"]["type"] == "KeyboardInterrupt"
    n_ok = sum(1 for r in results.values() if r and r["status"] == "ok")

    dry = run_llem(*resume[4:], "dry_run=true", timeout=120)  # the printed command, pasted
    assert dry.returncode == 0, output(dry)
    assert f"{n_ok} already done · {4 - n_ok} to run" in dry.stdout


@pytest.mark.slow
def test_submitit_local_runs_each_point_in_its_own_process(tiny: list[str], tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = run_llem(
        *tiny,
        *FAST,
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=5",
        "pytorch.batch_size=1,2",
        NO_REPORT,
        f"hydra.sweep.dir={sweep}",
        timeout=300,
    )
    assert proc.returncode == 0, output(proc)
    assert "2 ok · 0 failed · 0 skipped" in proc.stdout
    assert plan(sweep)["reuse_model"] is False and plan(sweep)["batch_size"] == 1
    for i in range(2):
        r = result(sweep, i)
        assert r["status"] == "ok"
        assert r["workload"]["batch_size"] == i + 1  # directory = grid index
        assert r["lifecycle"]["model_reused"] is False
        assert r["sweep"]["grid_index"] == i
    assert (sweep / ".submitit").is_dir()  # the jobs really ran through submitit


@pytest.mark.slow
def test_joblib_batch_reports_outcomes_and_exit_code_from_its_workers(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    sweep = tmp_path / "sweep"
    proc = run_llem(
        "model=hf",
        f"model.name_or_path={tiny_model_dir},{tmp_path / 'missing'}",
        *FAST,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "hydra.sweeper.max_batch_size=2",
        NO_REPORT,
        f"hydra.sweep.dir={sweep}",
        timeout=300,
    )
    assert proc.returncode == 4, output(proc)
    assert "points 1-2/2 launched together" in proc.stdout
    # llem's line says which points start; joblib's own three lines per batch are not shown
    assert "Joblib.Parallel" not in proc.stdout and "Launching jobs" not in proc.stdout
    assert "1 ok · 1 failed · 0 skipped" in proc.stdout
    assert result(sweep, 0)["status"] == "ok"
    failed = result(sweep, 1)
    assert failed["status"] == "failed" and failed["error"]["type"] == "PreflightError"
    assert f"failed #1 [model.name_or_path={tmp_path / 'missing'}]" in proc.stdout


@pytest.mark.slow
def test_two_sweeps_started_into_one_directory_one_runs_and_the_other_stops_at_once(
    tiny: list[str], tmp_path: Path
) -> None:
    """Two real sweeps, started together into one sweep directory: one runs every point, the
    other stops before it reads, moves or writes anything there, with one line and exit 3."""
    sweep = tmp_path / "sweep"
    args = [
        *tiny,
        "dataset.n_prompts=2",
        "measurement.warmup=0",
        "decoder.max_new_tokens=200",
        "decoder.min_new_tokens=200",
        "pytorch.batch_size=1,2,3,4",
        NO_REPORT,
        f"hydra.sweep.dir={sweep}",
    ]
    procs = [
        subprocess.Popen(
            llem_cmd(*args),
            cwd=REPO,
            env=llem_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    codes = [p.returncode for p in procs]
    report = "\n".join(f"exit {c}\n{o}\n{e[-3000:]}" for c, (o, e) in zip(codes, outs, strict=True))
    assert sorted(codes) == [0, 3], report
    _, stopped_err = outs[codes.index(3)]
    assert [line for line in stopped_err.splitlines() if line.strip()] == [
        f"error: another llem sweep is running in {sweep}: wait for it to finish, "
        "or give this one another hydra.sweep.dir"
    ], report
    ran_out, _ = outs[codes.index(0)]
    assert "4 ok · 0 failed · 0 skipped" in ran_out
    assert [result(sweep, i)["status"] for i in range(4)] == ["ok"] * 4
    assert plan(sweep)["run_order"] == [0, 1, 2, 3]
    assert not (sweep / "superseded").exists()  # nothing of the running sweep was moved aside

"""The end-of-sweep report built by a worker process started with the sweep: the same table, files
and log line as in-process, a fallback when the worker is gone, and no report for a sweep that
never ended."""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from llem.report import callback as callback_mod
from llem.report import worker as worker_mod
from llem.report.callback import ReportCallback
from llem.report.worker import ReportWorker


def _config(sweep: Path):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})


@pytest.mark.slow
def test_the_worker_builds_what_the_process_would(realistic_sweep: Path, capsys, caplog) -> None:
    cb = ReportCallback()
    cb.on_multirun_start(_config(realistic_sweep))
    assert cb._worker is not None
    with caplog.at_level(logging.INFO, logger="llem.report.callback"):
        cb.on_multirun_end(_config(realistic_sweep))
    by_worker = capsys.readouterr().out
    files = {
        p: p.read_bytes()
        for p in (realistic_sweep / "summary.csv", realistic_sweep / "results.csv")
    }
    assert len(pd.read_csv(realistic_sweep / "results.csv")) == 18
    assert (realistic_sweep / "plots" / "pareto.png").is_file()
    assert any("report written to" in r.getMessage() for r in caplog.records)

    ReportCallback(worker=False).on_multirun_end(_config(realistic_sweep))  # in this process
    assert capsys.readouterr().out == by_worker
    assert {p: p.read_bytes() for p in files} == files


@pytest.mark.slow
def test_a_dead_worker_falls_back_to_this_process(realistic_sweep: Path, capsys) -> None:
    cb = ReportCallback()
    cb.on_multirun_start(_config(realistic_sweep))
    assert cb._worker is not None
    cb._worker._proc.kill()
    cb._worker._proc.wait()
    cb.on_multirun_end(_config(realistic_sweep))
    assert "batch_size  quantization" in capsys.readouterr().out
    assert (realistic_sweep / "summary.csv").is_file()


@pytest.mark.slow
def test_the_workers_error_is_logged_like_the_processs(tmp_path: Path, caplog) -> None:
    (tmp_path / "empty").mkdir()
    messages = []
    for use_worker in (True, False):
        cb = ReportCallback(print_table=False, worker=use_worker)
        cb.on_multirun_start(_config(tmp_path / "empty"))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="llem.report.callback"):
            cb.on_multirun_end(_config(tmp_path / "empty"))
        messages.append([r.getMessage() for r in caplog.records])
    assert messages[0] == messages[1]
    assert "no runs found" in messages[0][0] and "ReportError: " in messages[0][0]


@pytest.mark.slow
def test_a_worker_without_a_job_builds_nothing(realistic_sweep: Path) -> None:
    w = ReportWorker.start()
    assert w is not None
    w.close()
    assert w._proc.returncode == 0
    assert not (realistic_sweep / "summary.csv").exists()


def test_the_worker_answers_one_json_line(realistic_sweep: Path) -> None:
    out = io.StringIO()
    job = json.dumps({"sweep_dir": str(realistic_sweep), "plots": False}) + "\n"
    assert worker_mod.main(io.StringIO(job), out) == 0
    ready, line = out.getvalue().splitlines()
    assert ready == worker_mod.READY
    answer = json.loads(line)
    assert answer["out_dir"] == str(realistic_sweep) and answer["files"] == 3
    assert "batch_size" in answer["text"] and answer["error_type"] is None


@pytest.mark.slow
def test_a_callback_with_a_worker_pickles_without_it(realistic_sweep: Path, capsys) -> None:
    # submitit and joblib pickle the Hydra context, callbacks included, for every job
    import pickle

    cb = ReportCallback()
    cb.on_multirun_start(_config(realistic_sweep))
    assert cb._worker is not None
    copy = pickle.loads(pickle.dumps(cb))
    assert copy._worker is None and copy.plots and copy.print_table
    cb.on_multirun_end(_config(realistic_sweep))  # the original still builds through its worker
    assert "batch_size  quantization" in capsys.readouterr().out


def _stat(path: Path) -> tuple[str, int]:
    """A process's state letter and CPU ticks (user + system)."""
    fields = path.read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[11]) + int(fields[12])


@pytest.mark.slow
def test_a_job_starts_only_once_the_worker_is_ready(realistic_sweep: Path, capsys) -> None:
    cb = ReportCallback()
    cb.on_multirun_start(_config(realistic_sweep))
    assert cb._worker is not None
    cb.on_job_start(_config(realistic_sweep))
    # ready: its imports are done, and it is blocked reading its job
    assert cb._worker is not None and cb._worker._ready
    stat = Path(f"/proc/{cb._worker._proc.pid}/stat")
    # after its 'ready' line it may run a moment longer (a loaded machine schedules it late)
    deadline = time.monotonic() + 5.0
    while _stat(stat)[0] != "S" and time.monotonic() < deadline:
        time.sleep(0.01)
    state, cpu = _stat(stat)
    time.sleep(0.3)
    assert state == "S" and _stat(stat) == ("S", cpu)  # blocked, and no CPU used meanwhile
    cb.on_multirun_end(_config(realistic_sweep))
    assert "batch_size  quantization" in capsys.readouterr().out


@pytest.mark.slow
def test_a_worker_not_ready_in_time_is_ended_and_the_report_built_here(
    realistic_sweep: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(callback_mod, "READY_TIMEOUT_S", 0.001)
    cb = ReportCallback()
    cb.on_multirun_start(_config(realistic_sweep))
    worker = cb._worker
    assert worker is not None
    cb.on_job_start(_config(realistic_sweep))
    assert cb._worker is None and worker._proc.returncode is not None
    cb.on_multirun_end(_config(realistic_sweep))
    assert "batch_size  quantization" in capsys.readouterr().out


def test_launchers_that_run_points_elsewhere_get_no_early_worker(realistic_sweep: Path) -> None:
    config = _config(realistic_sweep)
    config.hydra.runtime = {"choices": {"hydra/launcher": "joblib"}}
    cb = ReportCallback()
    cb.on_multirun_start(config)
    assert cb._worker is None  # it would run beside points of other processes

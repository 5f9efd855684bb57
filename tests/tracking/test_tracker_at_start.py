"""A tracker that cannot be used is bad input, said before anything is measured (issue 44): an
unreachable MLflow for a single run and for a grid, a deleted experiment on a real server, W&B
online refusing the key: one ``error:`` line, exit 3, no result.json, nothing left running. A dry
run checks nothing; W&B offline touches no network."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from llem.app.entrypoint import main
from llem.errors import EXIT_PREFLIGHT, PreflightError
from llem.testing.proctree import descendants
from llem.tracking.probe import check_tracker

from .conftest import free_port

FAST = [
    "decoder.max_new_tokens=2",
    "dataset.n_prompts=2",
    "measurement.warmup=0",
    "device=cpu",
    "measurement.energy=none",
]
MLFLOW_ENV = (  # what llem.tracking.mlflow_runs.client_settings sets for the process
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_DISABLE_TELEMETRY",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT",
)
needs_mlflow = pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None, reason="needs mlflow (pip install 'llem[tracking]')"
)
needs_wandb = pytest.mark.skipif(
    importlib.util.find_spec("wandb") is None, reason="needs wandb (pip install 'llem[tracking]')"
)


@pytest.fixture(autouse=True)
def _kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """sys.argv and the client's settings in the environment restored after each test."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    for key in (*MLFLOW_ENV, "WANDB_ERROR_REPORTING"):
        monkeypatch.setenv(key, os.environ.get(key, ""))
        if not os.environ[key]:
            monkeypatch.delenv(key)


def _model(tiny_model_dir: Path) -> list[str]:
    return ["model=hf", f"model.name_or_path={tiny_model_dir}", *FAST]


def _one_error_line(out: str, err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out + err, out + err
    assert "tracking: MLflow at" not in out + err, out + err  # no warning of the callback after it
    return lines[0]


def _results(root: Path) -> list[Path]:
    return sorted(root.rglob("result.json"))


@pytest.mark.mlflow
@needs_mlflow
def test_a_single_run_to_an_unreachable_uri_is_one_line_before_it_runs(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    run_dir = tmp_path / "run"
    code = main(
        [*_model(tiny_model_dir), "+tracking=mlflow", f"tracking.uri={uri}",
         f"hydra.run.dir={run_dir}"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    line = _one_error_line(out, err)
    assert code == EXIT_PREFLIGHT, out + err
    assert f"tracking.uri={uri}: MLflow cannot be reached" in line
    assert "Connection refused" in line and "llem-report --to-mlflow" in line
    assert _results(tmp_path) == [] and not run_dir.exists()


@pytest.mark.mlflow
@needs_mlflow
def test_a_grid_to_an_unreachable_uri_is_one_line_before_its_first_point(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    sweep = tmp_path / "sweep"
    code = main(
        ["--multirun", *_model(tiny_model_dir), "pytorch.batch_size=1,2", "+tracking=mlflow",
         f"tracking.uri={uri}", f"hydra.sweep.dir={sweep}", "~hydra.callbacks.report"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    line = _one_error_line(out, err)
    assert code == EXIT_PREFLIGHT, out + err
    assert f"tracking.uri={uri}: MLflow cannot be reached" in line
    assert _results(tmp_path) == [] and not sweep.exists()


@pytest.mark.mlflow
@needs_mlflow
def test_a_dry_run_does_not_check_the_tracker(tmp_path: Path, capsys) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    code = main(
        ["dry_run=true", "+tracking=mlflow", f"tracking.uri={uri}",
         f"hydra.run.dir={tmp_path / 'r'}"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and "error:" not in err, out + err


@pytest.mark.mlflow
@pytest.mark.slow  # the session's real MLflow server: its start takes seconds
def test_a_deleted_experiment_is_refused_before_the_run(
    mlflow_server: dict[str, Any], tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    from mlflow import MlflowClient

    uri, name = mlflow_server["uri"], f"deleted-{tmp_path.name}"
    client = MlflowClient(uri)
    experiment_id = client.create_experiment(name)
    client.delete_experiment(experiment_id)
    code = main(
        [*_model(tiny_model_dir), "+tracking=mlflow", f"tracking.uri={uri}",
         f"tracking.experiment={name}", f"hydra.run.dir={tmp_path / 'run'}"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    line = _one_error_line(out, err)
    assert code == EXIT_PREFLIGHT, out + err
    assert f"MLflow refuses tracking.experiment={name}" in line
    assert "'deleted' state" in line and f"--experiment-id {experiment_id}" in line
    assert _results(tmp_path) == []


@pytest.mark.mlflow
@pytest.mark.slow
def test_the_check_leaves_no_thread_running(mlflow_server: dict[str, Any], tmp_path) -> None:
    from llem.config.tracking import TrackerKind, TrackingConfig

    before = {t.ident for t in threading.enumerate()}
    check_tracker(TrackingConfig(TrackerKind.mlflow, uri=mlflow_server["uri"], experiment="probe"))
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []


@needs_wandb
@pytest.mark.parametrize(
    "key",
    ["short", "k" * 40],  # refused as no W&B key; a key's form, sent where nothing listens
)
def test_wandb_online_unreachable_or_refusing_is_one_line_and_leaves_no_process(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llem.config.tracking import TrackerKind, TrackingConfig, WandbMode

    monkeypatch.setenv("WANDB_API_KEY", key)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{free_port()}")
    t = TrackingConfig(TrackerKind.wandb, project="p", mode=WandbMode.online, timeout_s=2)
    before = set(descendants(os.getpid()))  # the session's MLflow server among them
    with pytest.raises(PreflightError) as refused:
        check_tracker(t)
    assert refused.value.exit_code == EXIT_PREFLIGHT
    assert "tracking.project=p: W&B online cannot be reached or refuses the key" in str(
        refused.value
    )
    assert "tracking.mode=offline" in str(refused.value)
    assert set(descendants(os.getpid())) - before == set()  # wandb's service, which a key of
    # W&B's form starts, stopped


@needs_wandb
def test_wandb_offline_is_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from llem.config.tracking import TrackerKind, TrackingConfig, WandbMode

    monkeypatch.setenv("WANDB_API_KEY", "short")  # online, this key would be refused
    check_tracker(TrackingConfig(TrackerKind.wandb, project="p", mode=WandbMode.offline))


@pytest.mark.mlflow
@pytest.mark.slow
def test_a_grid_checks_the_tracker_once(
    mlflow_server: dict[str, Any],
    tiny_model_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """Once before the first point, never per point: a point's wait is its neighbours' too."""
    import llem.app.job
    import llem.tracking.probe

    calls: list[object] = []

    def counted(section: object) -> None:
        calls.append(section)
        check_tracker(section)  # type: ignore[arg-type]

    monkeypatch.setattr(llem.tracking.probe, "check_tracker", counted)
    monkeypatch.setattr(llem.app.job, "check_tracker", counted)
    sweep = tmp_path / "sweep"
    code = main(
        ["--multirun", *_model(tiny_model_dir), "pytorch.batch_size=1,2", "+tracking=mlflow",
         f"tracking.uri={mlflow_server['uri']}", f"tracking.experiment={tmp_path.name}",
         f"hydra.sweep.dir={sweep}", "~hydra.callbacks.report"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert len(calls) == 1 and len(_results(sweep)) == 2

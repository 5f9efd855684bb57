"""``+tracking=mlflow`` refused in one line before anything runs; never part of the config hash.

These need no MLflow: a tracker that is not installed is planted by naming a package that is not.
"""

from __future__ import annotations

import sys

import pytest

from llem.app.entrypoint import main
from llem.config import tracking
from llem.config.config_hash import config_hash
from llem.config.schema import ExperimentConfig, TrackerKind


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_tracker_not_installed_is_one_line_with_exit_2(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(
        tracking.TRACKER_PACKAGES,
        "mlflow",
        ("llem_no_such_package", "pip install 'llem[tracking]'"),
    )
    code = main(["dry_run=true", "+tracking=mlflow", f"hydra.run.dir={tmp_path / 'r'}"])
    line = _one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "tracking.kind=mlflow" in line and "pip install 'llem[tracking]'" in line


def test_a_password_in_the_uri_is_refused_and_never_printed(
    tmp_path, capsys: pytest.CaptureFixture
) -> None:
    uri = "https://alice:planted-s3cret@mlflow.example.org"
    code = main(["dry_run=true", f"tracking.uri={uri}", f"hydra.run.dir={tmp_path / 'r'}"])
    err = capsys.readouterr().err
    line = _one_error_line(err)
    assert code == 2
    assert "tracking.uri=https://alice:***@mlflow.example.org" in line
    assert "MLFLOW_TRACKING_PASSWORD" in line
    assert "planted-s3cret" not in err


def test_a_uri_of_an_unknown_scheme_names_the_allowed_ones(capsys: pytest.CaptureFixture) -> None:
    assert main(["dry_run=true", "tracking.uri=ftp://host"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "tracking.uri=ftp://host" in line and "http, https" in line


def test_tracking_is_not_part_of_the_config_hash() -> None:
    tracked = ExperimentConfig()
    tracked.tracking.kind = TrackerKind.mlflow
    tracked.tracking.uri = "http://127.0.0.1:5000"
    tracked.tracking.experiment = "other"
    assert config_hash(tracked) == config_hash(ExperimentConfig())


def test_wandb_not_installed_is_one_line_with_exit_2(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(
        tracking.TRACKER_PACKAGES, "wandb", ("llem_no_such_package", "pip install 'llem[tracking]'")
    )
    argv = ["dry_run=true", "+tracking=wandb", "tracking.project=p"]
    code = main([*argv, f"hydra.run.dir={tmp_path / 'r'}"])
    line = _one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "tracking.kind=wandb" in line and "pip install 'llem[tracking]'" in line


def test_wandb_without_a_project_is_one_line_with_exit_2(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(
        tracking.TRACKER_PACKAGES, "wandb", ("json", "pip install 'llem[tracking]'")
    )
    code = main(["dry_run=true", "+tracking=wandb", f"hydra.run.dir={tmp_path / 'r'}"])
    line = _one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "tracking.project=None" in line and "+tracking=wandb needs the W&B project" in line


def test_a_wandb_mode_outside_offline_and_online_is_refused(
    tmp_path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["dry_run=true", "+tracking=wandb", "tracking.project=p", "tracking.mode=dryrun"]
    code = main([*argv, f"hydra.run.dir={tmp_path / 'r'}"])
    line = _one_error_line(capsys.readouterr().err)
    assert code == 2
    assert "tracking.mode" in line and "dryrun" in line and "offline" in line, line

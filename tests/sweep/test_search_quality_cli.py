"""A search on quality or carbon through llem's entrypoint (issue 32): where the dataset scores no
answer, a quality constraint stops the search before anything runs, exit 2, one line naming the
key; so does a carbon objective where no grid intensity is given."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llem.app.entrypoint import main

NO_REPORT = "~hydra.callbacks.report"  # tests/sweep/conftest.py's (a bare `conftest` is ambiguous)

pytest.importorskip("optuna")


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))


def test_a_quality_constraint_on_a_dataset_without_references_is_exit_2(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "search"
    args = [
        "hydra.sweeper.objective=throughput.output_tokens_per_s",
        "hydra.sweeper.direction=maximize",
        "hydra.sweeper.constraints=['quality.value >= 0.6']",
        "pytorch.batch_size=1,2",
    ]
    code = main(
        ["--multirun", "hydra/sweeper=llem_search", *tiny, NO_REPORT, f"hydra.sweep.dir={d}", *args]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: hydra.sweeper.constraints: quality.value needs scored answers")
    assert "dataset.source=builtin scores no answer" in err[0] and "dataset=arithmetic" in err[0]
    assert "Traceback" not in "\n".join(err)
    assert not d.exists() or not list(d.glob("*/result.json"))


def test_a_carbon_objective_without_an_intensity_is_exit_2_before_anything_runs(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "search"
    args = ["hydra.sweeper.objective=footprint.g_per_output_token", "pytorch.batch_size=1,2"]
    code = main(
        ["--multirun", "hydra/sweeper=llem_search", *tiny, NO_REPORT, f"hydra.sweep.dir={d}", *args]
    )
    assert code == 2
    (line, *_) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "error: hydra.sweeper.objective: footprint.g_per_output_token needs a grid intensity, and "
        "none is given (allowed: set carbon.intensity_g_per_kwh or carbon.country or carbon.zone; "
        "docs/footprint.md)"
    )
    assert not d.exists() or not list(d.glob("*/result.json"))


def test_a_carbon_objective_with_an_intensity_on_a_machine_without_energy_says_that(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = [
        "hydra.sweeper.objective=footprint.g_per_output_token",
        "carbon.intensity_g_per_kwh=400",
        "pytorch.batch_size=1,2",
    ]
    d = tmp_path / "search"
    code = main(
        ["--multirun", "hydra/sweeper=llem_search", *tiny, NO_REPORT, f"hydra.sweep.dir={d}", *args]
    )
    assert code == 2
    (line, *_) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "error: hydra.sweeper.objective: footprint.g_per_output_token needs measured energy"
    )

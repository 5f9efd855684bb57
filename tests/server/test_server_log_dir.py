"""A launched server's log goes into the run directory the run hands the engine with its sections,
in a Hydra job or not (the Python API, a test): the engine never asks Hydra where it runs."""

from __future__ import annotations

from pathlib import Path

from llem.backends import create_backend
from llem.backends.server.backend import ServerBackend, log_dir
from llem.config.schema import ExperimentConfig
from llem.config.server import Launch


def _launched() -> ExperimentConfig:
    exp = ExperimentConfig(backend="server")
    exp.server.launch = Launch.vllm
    return exp


def test_the_run_directory_handed_in_holds_the_server_log(tmp_path: Path) -> None:
    backend = create_backend(_launched(), tmp_path / "run")
    assert isinstance(backend, ServerBackend)
    assert log_dir(backend.sections.run_dir) == tmp_path / "run"


def test_outside_a_run_the_log_goes_to_a_fresh_directory(tmp_path: Path) -> None:
    backend = create_backend(_launched())
    where = log_dir(backend.sections.run_dir)
    assert where.is_dir() and where != tmp_path and where.name.startswith("llem-server-")
    where.rmdir()

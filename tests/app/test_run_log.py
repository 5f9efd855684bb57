"""A failed run's llem.log holds what the terminal said: the error and its hint, and the traceback
of an unexpected exception; the terminal says it once (stderr), never again through the log's
console handler. A single run and each point of a sweep, whose own llem.log is the one a user
opens afterwards."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llem.app.entrypoint import main
from llem.errors import RunError

FAST = ["decoder.max_new_tokens=3", "dataset.n_prompts=2", "measurement.warmup=0"]
MESSAGE = "planted: the model would not load"
HINT = "planted: free the device and run again"


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.chdir(tmp_path)


def _fail_load(monkeypatch: pytest.MonkeyPatch, exc: Exception) -> None:
    from llem.backends.pytorch import PyTorchBackend

    def load(self: object, device: str) -> None:
        raise exc

    monkeypatch.setattr(PyTorchBackend, "load", load)


def _log_lines(run_dir: Path) -> list[str]:
    """The log's messages, without the formatter's ``[time][logger][LEVEL] - `` head."""
    text = (run_dir / "llem.log").read_text()
    return [line.split("] - ", 1)[-1] for line in text.splitlines()]


def test_a_failed_runs_log_holds_its_error_and_hint(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _fail_load(monkeypatch, RunError(MESSAGE, hint=HINT))
    run_dir = tmp_path / "run"
    args = ["model=hf", f"model.name_or_path={tiny_model_dir}", *FAST]
    assert main([*args, f"hydra.run.dir={run_dir}"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"error: {MESSAGE}", f"hint: {HINT}"]
    assert MESSAGE not in out  # said once, on stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["error"]["hint"] == HINT
    lines = _log_lines(run_dir)
    assert lines[-2:] == [f"error: {MESSAGE}", f"hint: {HINT}"]


def test_an_unexpected_exceptions_traceback_is_in_the_log_and_once_on_the_terminal(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _fail_load(monkeypatch, ZeroDivisionError("planted division"))
    run_dir = tmp_path / "run"
    args = ["model=hf", f"model.name_or_path={tiny_model_dir}", *FAST]
    assert main([*args, f"hydra.run.dir={run_dir}"]) == 1
    out, err = capsys.readouterr()
    assert err.count("Traceback") == 1 and "ZeroDivisionError: planted division" in err
    assert "Traceback" not in out
    log = (run_dir / "llem.log").read_text()
    assert "unexpected error: ZeroDivisionError: planted division" in log
    assert "Traceback" in log and "raise exc" in log  # the frame that raised


@pytest.mark.slow  # a two-point sweep: about 3 s
def test_each_failed_sweep_points_log_holds_its_error_and_hint(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_load(monkeypatch, RunError(MESSAGE, hint=HINT))
    sweep = tmp_path / "sweep"
    args = ["model=hf", f"model.name_or_path={tiny_model_dir}", *FAST]
    assert main(["--multirun", *args, "pytorch.batch_size=1,2", f"hydra.sweep.dir={sweep}"]) == 4
    for point in ("0", "1"):
        result = json.loads((sweep / point / "result.json").read_text())
        assert result["status"] == "failed" and result["error"]["hint"] == HINT
        lines = _log_lines(sweep / point)
        assert lines[-2:] == [MESSAGE, f"hint: {HINT}"], point

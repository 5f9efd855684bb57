"""The command line: options anywhere, usage errors as one line, errors printed once."""

from __future__ import annotations

import sys

import pytest

from llem.app.argv import normalize_argv
from llem.app.entrypoint import main


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))


def test_flags_may_stand_after_overrides() -> None:
    assert normalize_argv(["dry_run=true", "--multirun", "a=1,2", "--cfg", "job"]) == [
        "--cfg",
        "job",
        "--multirun",
        "dry_run=true",
        "a=1,2",
    ]
    assert normalize_argv(["a=1", "-m", "--info"]) == ["--multirun", "--info", "a=1"]


def test_the_readme_dry_run_command_with_the_flag_in_the_middle(
    tmp_path, capsys: pytest.CaptureFixture
) -> None:
    code = main(
        [
            "dry_run=true",
            "--multirun",
            "pytorch.batch_size=1,4",
            f"hydra.sweep.dir={tmp_path / 's'}",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "sweep plan: 2 points" in out.out
    assert "usage:" not in out.err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--cfg", "bogus"], ["--cfg", "bogus", "job"]),
        (["--config-name"], ["--config-name", "expected one argument"]),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(
    argv: list[str], words: list[str], capsys: pytest.CaptureFixture
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("error: command line: ")
    assert all(w in lines[0] for w in words)
    assert len(lines) <= 2 and "usage:" not in err and "Traceback" not in err


def test_a_failed_pre_flight_prints_its_error_once(tmp_path, capsys: pytest.CaptureFixture) -> None:
    code = main(["model=hf", f"model.name_or_path={tmp_path / 'nope'}"])
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("error:") == 1 and "Error executing job" not in err


def test_an_error_raised_while_ctrl_c_unwinds_still_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A library whose cleanup fails under Ctrl-C raises another error: still an interruption."""
    import llem.app.entrypoint

    def interrupted_then_broken(args: list[str], command: object) -> object:
        try:
            raise KeyboardInterrupt
        finally:
            raise AttributeError("'NoneType' object has no attribute '_invalidate_flags_cache'")

    monkeypatch.setattr(llem.app.entrypoint, "invoke", interrupted_then_broken)
    assert main(["pytorch.batch_size=1"]) == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted:") and "Traceback" not in err


def test_help_lists_optional_groups_with_their_plus_form() -> None:
    from llem.app.argv import help_text

    text = help_text()
    chosen, optional = text.split("optional groups", 1)
    chosen = chosen.split("GROUP=OPTION", 1)[1]
    assert "+experiment=" in optional and "+backend=" in optional
    for group in ("experiment", "backend"):
        assert f"  {group} " in optional and f"  {group} " not in chosen
    for group in ("model", "decoder", "dataset", "quantization", "measurement"):
        assert f"  {group} " in chosen


def test_ctrl_c_prints_the_whole_command_that_resumes(tmp_path, monkeypatch, capsys) -> None:
    """The original command line, with hydra.sweep.dir replaced, shell-quoted and absolute."""
    import shlex
    from pathlib import Path

    import llem.app.entrypoint

    def interrupted_sweep(args: list[str], command: object) -> object:
        command.sweep_started(Path("out dir/sweep"), None)  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(llem.app.entrypoint, "invoke", interrupted_sweep)
    args = ["--multirun", "repeat=range(3)", "hydra.sweep.dir=out dir/sweep", "decoder=greedy"]
    assert main(args) == 130
    err = capsys.readouterr().err
    command = shlex.split(err.split("resume with: ", 1)[1])
    assert command == [
        "python",
        "-m",
        "llem",
        "--multirun",
        "repeat=range(3)",
        "decoder=greedy",
        f"hydra.sweep.dir={tmp_path / 'out dir' / 'sweep'}",
    ]

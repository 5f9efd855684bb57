"""Re-running into a sweep directory: finished work is found by configuration, never by index,
and nothing older is presented as a new point's result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from llem.app.entrypoint import main
from llem.report.load import load_runs

from .conftest import FAST, NO_REPORT, result


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))


def sweep(tiny: list[str], sweep_dir: Path, *args: str) -> int:
    return main(["--multirun", *tiny, *FAST, NO_REPORT, f"hydra.sweep.dir={sweep_dir}", *args])


def batch_size(sweep_dir: Path, index: int) -> int:
    return int(result(sweep_dir, index)["config"]["pytorch"]["batch_size"])


@pytest.mark.slow
def test_adding_a_grid_value_keeps_finished_configurations_and_runs_only_the_new_one(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "sweep"
    assert sweep(tiny, d, "pytorch.batch_size=1,2") == 0
    first = {i: result(d, i)["started_at"] + result(d, i)["config_hash"] for i in (0, 1)}

    # A new value in front shifts every index: 4 -> #0, 1 -> #1, 2 -> #2.
    assert sweep(tiny, d, "pytorch.batch_size=4,1,2") == 0
    assert [batch_size(d, i) for i in (0, 1, 2)] == [4, 1, 2]
    # bs=1 and bs=2 were not re-run: their results are the first sweep's, moved to their points.
    assert result(d, 1)["started_at"] + result(d, 1)["config_hash"] == first[0]
    assert result(d, 2)["started_at"] + result(d, 2)["config_hash"] == first[1]
    # ... and each says its new index (and where it was found), not the one it was written at.
    assert [result(d, i)["sweep"]["grid_index"] for i in (0, 1, 2)] == [0, 1, 2]
    assert [result(d, i)["sweep"]["moved_from"] for i in (1, 2)] == [0, 1]
    plan = json.loads((d / "sweep_plan.json").read_text())
    assert [p["status"] for p in plan["points"]] == ["pending", "done", "done"]
    assert "its finished result was in #0; moved to #1 (not re-run)" in capsys.readouterr().out
    runs = load_runs([d]).frame
    assert sorted(runs["pytorch.batch_size"].tolist()) == [1, 2, 4]
    assert set(runs["status"]) == {"ok"}


@pytest.mark.slow
def test_an_older_result_never_stands_for_a_point_that_failed_before_writing(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "sweep"
    assert sweep(tiny, d, "pytorch.batch_size=1,2") == 0
    assert result(d, 0)["status"] == "ok"

    # Same directory, another grid: point #0 now fails pre-flight (no such model directory);
    # point #1 (batch 2 on the tiny model) is the first sweep's #1, done. (A problem that every
    # point shares would stop the sweep before it moved anything: test_sweep_refusals.)
    missing = tmp_path / "no-such-model"
    tiny_dir = tiny[1].split("=", 1)[1]
    code = sweep(tiny, d, f"model.name_or_path={missing},{tiny_dir}", "pytorch.batch_size=2")
    assert code == 4
    r = result(d, 0)
    assert r["status"] == "failed" and r["error"]["type"] == "PreflightError"
    assert result(d, 1)["status"] == "ok"
    moved = list((d / "superseded").glob("*/0/result.json"))
    assert len(moved) == 1 and json.loads(moved[0].read_text())["status"] == "ok"
    out = capsys.readouterr().out
    # one line says what was moved and where (the old model path is what differs)
    moved_line = next(line for line in out.splitlines() if "#0: an older ok result" in line)
    assert "model.name_or_path=" in moved_line and "moved aside to" in moved_line
    assert str(d / "superseded") in moved_line
    rows = load_runs([d]).frame
    assert sorted(rows["status"]) == ["failed", "ok"]  # superseded/ is not read with the sweep


@pytest.mark.slow
def test_a_smaller_grid_reports_its_own_points_and_names_the_older_ones(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    d = tmp_path / "sweep"
    assert sweep(tiny, d, "pytorch.batch_size=1,2,3") == 0
    capsys.readouterr()
    # Another grid into the same directory: #0 (bs=1) is done, #1 (was bs=2) moves aside, #2
    # (bs=3) is an older grid's point the new plan does not have.
    assert sweep(tiny, d, "pytorch.batch_size=1,4") == 0
    out = capsys.readouterr().out
    assert "#1: an older ok result [pytorch.batch_size=2] moved aside to" in out
    assert "#2: an older grid's point, not in this sweep's plan: left in place" in out
    assert (d / "2" / "result.json").is_file()
    runs = load_runs([d])
    assert sorted(runs.frame["pytorch.batch_size"].tolist()) == [1, 4]
    assert [p.name for p in runs.outside_plan] == ["2"]


@pytest.mark.slow
def test_the_report_refuses_a_result_written_for_other_overrides(
    tiny: list[str], tmp_path: Path
) -> None:
    d = tmp_path / "sweep"
    assert sweep(tiny, d, "pytorch.batch_size=1,2") == 0
    # Simulate a job killed after Hydra recorded its overrides but before it wrote a result.
    (d / "0" / ".hydra" / "overrides.yaml").write_text("- pytorch.batch_size=8\n")
    rows = load_runs([d]).frame.set_index("run_dir")
    row = rows.loc[str((d / "0").resolve())]
    assert row["status"] == "missing"
    assert "other overrides" in row["error.message"]


@pytest.mark.slow
def test_a_configuration_error_inside_a_running_point_fails_it(
    tiny: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning skips invalid combinations; an error raised once a point runs is a failure."""
    import llem.runner.chat_template
    from llem.errors import ConfigError

    real = llem.runner.chat_template.load_prompts

    def load_prompts(cfg, tokenizer):  # type: ignore[no-untyped-def]
        if cfg.n_prompts == 2:
            raise ConfigError("dataset.n_prompts=2: the prompt file changed under the sweep")
        return real(cfg, tokenizer)

    monkeypatch.setattr(llem.runner.chat_template, "load_prompts", load_prompts)
    d = tmp_path / "sweep"
    assert sweep(tiny, d, "dataset.n_prompts=1,2") == 4  # failed, not skipped with exit 0
    assert result(d, 0)["status"] == "ok"
    failed = result(d, 1)
    assert failed["status"] == "failed" and failed["error"]["type"] == "ConfigError"
    assert "dataset.n_prompts=2" in failed["error"]["message"]


@pytest.mark.slow
def test_a_sweep_written_with_the_older_hash_resumes_without_running_again(
    tiny: list[str], tmp_path: Path
) -> None:
    from hydra import compose, initialize_config_module

    from llem.config.config_hash import config_hash, legacy_config_hash
    from llem.runner.prepare import prepare

    d = tmp_path / "sweep"
    assert sweep(tiny, d, "pytorch.batch_size=1,2") == 0
    # the directory as the llem before the active-engine hash wrote it: every section hashed
    hashes = {}
    with initialize_config_module(version_base="1.3", config_module="llem.conf"):
        for i, bs in ((0, 1), (1, 2)):
            exp = prepare(compose("config", [*tiny, *FAST, f"pytorch.batch_size={bs}"])).exp
            hashes[i] = (legacy_config_hash(exp), config_hash(exp))
            assert hashes[i][0] != hashes[i][1]
            written = result(d, i)
            assert written["config_hash"] == hashes[i][1]
            written["config_hash"] = hashes[i][0]
            (d / str(i) / "result.json").write_text(json.dumps(written))
    started = {i: result(d, i)["started_at"] for i in (0, 1)}

    assert sweep(tiny, d, "pytorch.batch_size=1,2,4") == 0
    plan = json.loads((d / "sweep_plan.json").read_text())
    assert [p["status"] for p in plan["points"]] == ["done", "done", "pending"]
    # not run again; their hash is today's, so the report pools them with new repeats
    assert {i: result(d, i)["started_at"] for i in (0, 1)} == started
    assert [result(d, i)["config_hash"] for i in (0, 1)] == [hashes[0][1], hashes[1][1]]

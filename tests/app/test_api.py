"""``import llem``: run, results and errors from Python, the same as the command line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

import llem
from llem.app.entrypoint import main

FAST = ["decoder.max_new_tokens=3", "dataset.n_prompts=2", "measurement.warmup=0"]


@pytest.fixture(autouse=True)
def _keep_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", list(sys.argv))


@pytest.fixture()
def tiny(tiny_model_dir: Path) -> list[str]:
    return ["model=hf", f"model.name_or_path={tiny_model_dir}", *FAST]


@pytest.mark.slow
def test_the_api_and_the_cli_produce_the_same_result(tiny: list[str], tmp_path: Path) -> None:
    argv = list(sys.argv)
    r = llem.run([*tiny, "pytorch.batch_size=2"], output_dir=tmp_path / "api")
    assert sys.argv == argv  # composed through Hydra's compose API: the command line is untouched
    assert isinstance(r, llem.RunResult)
    assert r.status == "ok" and r.throughput.output_tokens_per_s is not None
    assert r.energy.j_per_output_token is None and "energy.j_per_output_token" in r.null_reasons

    assert main([*tiny, "pytorch.batch_size=2", f"hydra.run.dir={tmp_path / 'cli'}"]) == 0
    c = llem.RunResult.from_json(tmp_path / "cli" / "result.json")
    assert llem.RunResult.from_json(tmp_path / "api" / "result.json") == r
    for name in ("status", "config_hash", "overrides", "model", "backend", "device", "dtype"):
        assert getattr(c, name) == getattr(r, name), name
    assert c.overrides[-1] == "pytorch.batch_size=2"
    assert c.config == r.config
    assert (c.workload.output_tokens, c.workload.requests) == (
        r.workload.output_tokens,
        r.workload.requests,
    )
    # the same files, and Hydra's record of the same job
    api, cli = tmp_path / "api", tmp_path / "cli"
    assert sorted(p.name for p in api.rglob("*")) == sorted(p.name for p in cli.rglob("*"))
    assert "Traceback" not in (api / "llem.log").read_text() and (api / "llem.log").stat().st_size
    for name in ("config.yaml", "overrides.yaml"):
        assert (api / ".hydra" / name).read_text() == (cli / ".hydra" / name).read_text()
    api_hydra = yaml.safe_load((api / ".hydra" / "hydra.yaml").read_text())["hydra"]
    cli_hydra = yaml.safe_load((cli / ".hydra" / "hydra.yaml").read_text())["hydra"]
    for hydra in (api_hydra, cli_hydra):
        hydra["run"]["dir"] = hydra["runtime"]["output_dir"] = ""
        hydra["overrides"]["hydra"][0] = ""
    assert api_hydra == cli_hydra


@pytest.mark.slow
def test_bad_input_raises_the_cli_message_never_system_exit(
    tiny: list[str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(llem.ConfigError, match="decoder.temperature=hot"):
        llem.run(["decoder.temperature=hot"], output_dir=tmp_path / "a")
    with pytest.raises(llem.ConfigError, match="no such key"):
        llem.run(["+decoder.temprature=0.7"], output_dir=tmp_path / "b")
    with pytest.raises(llem.PreflightError, match="no such local directory"):
        llem.run(["model=hf", f"model.name_or_path={tmp_path / 'nope'}"], output_dir=tmp_path / "c")
    assert not (tmp_path / "c").exists()  # nothing left behind, as on the command line
    with pytest.raises(llem.ConfigError, match="--multirun"):
        llem.run(["--multirun", "pytorch.batch_size=1,2"])
    assert main(["decoder.temperature=hot"]) == 2
    err = capsys.readouterr().err
    # one line naming the key, the value and what is allowed (Hydra's own text did not say)
    assert "error: decoder.temperature=hot: not a number (allowed: a number such as 0.7)" in err


@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("pytorch.batch_size=four", "pytorch.batch_size=four: not a whole number"),
        ("measurement.save_outputs=maybe", "measurement.save_outputs=maybe: not true or false"),
    ],
)
def test_a_value_of_the_wrong_type_names_what_is_allowed(capsys, override: str, line: str) -> None:
    assert main([override]) == 2
    err = capsys.readouterr().err
    assert f"error: {line}" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_load_results_is_the_report_table(tiny: list[str], tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    assert main(["--multirun", *tiny, "pytorch.batch_size=1,2", f"hydra.sweep.dir={sweep}"]) == 0
    df = llem.load_results(sweep)
    import pandas as pd

    csv = pd.read_csv(sweep / "results.csv")
    assert list(df.columns) == list(csv.columns)
    assert df["pytorch.batch_size"].tolist() == csv["pytorch.batch_size"].tolist() == [1, 2]
    assert df["status"].tolist() == ["ok", "ok"]

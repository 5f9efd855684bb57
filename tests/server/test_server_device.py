"""A server llem did not start (``server.url``) runs on a device llem cannot see: the result and
the run's line say what is known of it (the GPUs ``server.gpus`` names, else "not stated", never
llem's own device), name the served model beside the tokenizer's, and the report reads them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from llem.report.build import build_report
from llem.result import RunResult
from llem.runner import Runner
from llem.runner.summary import summary_line
from llem.testing.cli import compose_tiny
from tests.server.fake_openai import Plan
from tests.server.fake_thread import fake_in_thread


def _run(model_dir: Path, run_dir: Path, url: str, *extra: str) -> RunResult:
    overrides = [
        "+backend=server",
        f"server.url={url}",
        "server.model=fake-model",
        "traffic.n_requests=4",
        "measurement.warmup=0",
        *extra,
    ]
    return Runner().run(compose_tiny(model_dir, *overrides), run_dir)


def _first_line(result: RunResult, run_dir: Path) -> str:
    return summary_line(result, run_dir).splitlines()[0].split(": 4 requests")[0]


def test_a_running_servers_device_is_not_stated_unless_server_gpus_names_it(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    with fake_in_thread(Plan()) as url:
        unnamed = _run(tiny_model_dir, tmp_path / "sweep" / "0", url)
        named = _run(tiny_model_dir, tmp_path / "sweep" / "1", url, "server.gpus=[0,1]")
    # llem resolved device=cpu for itself; neither result says the server ran there
    assert unnamed.device is None
    assert unnamed.null_reasons["device"] == (
        f"not stated: the server at {url} was already running (server.url), so llem cannot "
        "know its device; server.gpus names its GPUs"
    )
    assert named.device == "cuda" and "device" not in named.null_reasons
    for result in (unnamed, named):
        assert result.server is not None
        assert result.server.model == "fake-model"
        assert result.server.tokenizer == str(tiny_model_dir)
    assert _first_line(unnamed, tmp_path / "sweep" / "0") == (
        f"llem: fake-model (served; tokenizer {tiny_model_dir}) on the server's device, not "
        "stated (server.gpus names its GPUs), dtype the server's own"
    )
    assert _first_line(named, tmp_path / "sweep" / "1") == (
        f"llem: fake-model (served; tokenizer {tiny_model_dir}) on the server's GPUs 0, 1 "
        "(server.gpus), dtype the server's own"
    )

    report = build_report([tmp_path / "sweep"], plots=False)
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv")
    assert sorted(summary["gpu"]) == ["cuda (GPU model not recorded)", "device not stated"]
    assert summary["device"].isna().sum() == 1  # the null device stays null, not "cpu"
    assert "device not stated" in report.text
    runs = pd.read_csv(tmp_path / "sweep" / "results.csv")
    assert set(runs["server.tokenizer"]) == {str(tiny_model_dir)}
    assert runs["null_reasons.device"].notna().sum() == 1


def test_a_kept_server_is_not_reused_across_stated_gpus() -> None:
    """A sweep reuses a running server's load when the keys match: the GPUs it is stated to run
    on are part of the key, so a point never inherits another point's device."""
    from llem.backends import create_backend
    from llem.config.schema import ExperimentConfig

    def key(gpus: list[int] | None) -> str:
        exp = ExperimentConfig(backend="server")
        exp.server.url = "http://127.0.0.1:8000"
        exp.server.gpus = gpus
        return create_backend(exp).load_key("cpu")

    assert len({key(None), key([0]), key([0, 1])}) == 3
    assert key([0]) == key([0])


def test_a_result_written_before_the_tokenizer_was_kept_reads_with_it_null() -> None:
    from llem.result import ServerSection

    result = RunResult(status="ok")
    result.server = ServerSection(url="u", launched=False, endpoint="completions", model="m")
    old = result.to_json()
    del old["server"]["tokenizer"]
    read = RunResult.from_json(old)
    assert read.server is not None and read.server.tokenizer is None

"""``+backend=server`` end to end against the fake OpenAI-compatible server (run in a thread of
the test): token counts are the server's planted usage, and each fault is a failed point with one
line, never a guess or a hang."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from llem.backends import create_backend
from llem.config.schema import ExperimentConfig
from llem.config.server import Launch
from llem.errors import PreflightError, RunError
from llem.testing.cli import output, run_tiny
from llem.testing.forked_cli import run_llem
from tests.server.fake_openai import Plan
from tests.server.fake_thread import fake_in_thread

N_REQUESTS = 6
PLANTED = {"prompt_tokens": 5, "completion_tokens": 7}


def _overrides(url: str) -> list[str]:
    return [
        "+backend=server",
        f"server.url={url}",
        "server.model=fake-model",
        f"traffic.n_requests={N_REQUESTS}",
        "measurement.warmup=1",
    ]


def _results(root: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in root.glob("outputs/**/result.json")]


def _refused_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_run_takes_its_token_counts_from_the_servers_usage(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    plan = Plan(usage=dict(PLANTED))
    with fake_in_thread(plan) as url:
        result = run_tiny(tiny_model_dir, tmp_path / "run", *_overrides(url))
    assert result["status"] == "ok"
    w = result["workload"]
    assert w["requests"] == N_REQUESTS
    assert w["output_tokens"] == N_REQUESTS * PLANTED["completion_tokens"]
    assert w["input_tokens"] == N_REQUESTS * PLANTED["prompt_tokens"]
    assert result["server"]["url"] == url and result["server"]["launched"] is False
    assert result["null_reasons"]["server.metrics_source"]
    bodies = [s["body"] for s in plan.seen]
    assert len(bodies) == N_REQUESTS + 4  # one warm-up round of the first 4 prompts
    assert {b["max_tokens"] for b in bodies} == {64} and {b["temperature"] for b in bodies} == {0}


def test_a_server_without_usage_fails_the_run_instead_of_counting(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    with fake_in_thread(Plan(usage=None)) as url, pytest.raises(RunError) as err:
        run_tiny(tiny_model_dir, tmp_path / "run", *_overrides(url))
    assert "carried no usage" in err.value.message
    assert "does not count them itself" in err.value.message
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "failed"


def test_the_api_key_is_sent_and_never_written(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-planted-secret-4711"
    monkeypatch.setenv("LLEM_TEST_SERVER_KEY", secret)
    plan = Plan(usage=dict(PLANTED))
    with fake_in_thread(plan) as url:
        result = run_tiny(
            tiny_model_dir,
            tmp_path / "run",
            *_overrides(url),
            "server.api_key_env=LLEM_TEST_SERVER_KEY",
            "measurement.save_outputs=true",
        )
    assert result["status"] == "ok"
    assert {s["headers"].get("Authorization") for s in plan.seen} == {f"Bearer {secret}"}
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert written and not [p for p in written if secret in p.read_text(errors="replace")]


def test_a_model_the_server_does_not_serve_is_refused_at_preflight(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """``GET /v1/models`` is asked before anything loads: the run's name missing from the list is
    a pre-flight failure (exit 3), with nothing written."""
    plan = Plan()
    with fake_in_thread(plan) as url, pytest.raises(PreflightError) as err:
        run_tiny(tiny_model_dir, tmp_path / "run", *_overrides(url), "server.model=other")
    assert err.value.problems == [
        f"model 'other' is not served by {url} (served: fake-model); set server.model to the "
        "served name"
    ]
    assert not (tmp_path / "run").exists()
    assert plan.seen == []  # no request was sent


def test_a_refused_url_is_refused_at_preflight(tiny_model_dir: Path, tmp_path: Path) -> None:
    url = _refused_url()
    with pytest.raises(PreflightError) as err:
        run_tiny(tiny_model_dir, tmp_path / "run", *_overrides(url))
    (problem,) = err.value.problems
    assert problem.startswith(f"cannot connect to the server at {url}/v1/models (")
    assert not (tmp_path / "run").exists()


def test_a_running_server_that_stops_serving_the_model_after_preflight_fails_the_load(
    tiny_model_dir: Path,
) -> None:
    """Pre-flight asked; the load asks again (the server may have changed since): a RunError."""
    exp = ExperimentConfig(backend="server")
    exp.model.name_or_path = str(tiny_model_dir)
    exp.model.gguf_file = None
    with fake_in_thread(Plan()) as url, pytest.raises(RunError) as err:
        exp.server.url = url
        exp.server.model = "other"
        create_backend(exp).load("cpu")
    assert err.value.message.startswith(f"model 'other' is not served by {url} (served: ")


def test_the_load_key_changes_with_the_launch_arguments_only() -> None:
    def key(**server: Any) -> str:
        exp = ExperimentConfig(backend="server")
        exp.server.launch = Launch.vllm
        for k, v in server.items():
            setattr(exp.server, k, v)
        return create_backend(exp).load_key("cpu")

    assert key(max_num_seqs=4) == key(max_num_seqs=4, request_timeout_s=5.0)
    assert key(max_num_seqs=4) != key(max_num_seqs=8)
    assert key(args={"max_model_len": 256}) != key()


@pytest.mark.slow
def test_the_command_line_measures_a_running_server(tiny_model_dir: Path, tmp_path: Path) -> None:
    plan = Plan(usage=dict(PLANTED))
    with fake_in_thread(plan) as url:
        proc = run_llem(
            "model=hf",
            f"model.name_or_path={tiny_model_dir}",
            "device=cpu",
            "measurement.energy=none",
            *_overrides(url),
            cwd=tmp_path,
            timeout=300,
        )
    assert proc.returncode == 0, output(proc)
    (result,) = _results(tmp_path)
    assert result["workload"]["output_tokens"] == N_REQUESTS * PLANTED["completion_tokens"]
    assert result["backend"] == "server" and result["server"]["endpoint"] == "completions"
    # the running server's batch limit was not given: nothing is made up for it
    assert result["workload"]["batch_size"] is None and result["concurrency"]["knob_value"] is None
    why = result["null_reasons"]
    assert "maximum batch is unknown" in why["workload.batch_size"]
    assert result["steady_state"] is None and "maximum batch is unknown" in why["steady_state"]


@pytest.mark.slow
def test_a_refused_url_fails_preflight_with_one_line_and_writes_nothing(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    url = _refused_url()
    proc = run_llem(
        "model=hf",
        f"model.name_or_path={tiny_model_dir}",
        "device=cpu",
        "measurement.energy=none",
        *_overrides(url),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 3, output(proc)
    assert "Traceback" not in proc.stderr, output(proc)
    said = f"1 pre-flight check failed: cannot connect to the server at {url}/v1/models ("
    lines = [ln for ln in proc.stderr.splitlines() if said in ln]
    assert len(lines) == 1, output(proc)
    assert not (tmp_path / "outputs").exists(), output(proc)


@pytest.mark.slow
def test_a_sweep_point_whose_model_is_not_served_fails_and_the_others_run(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """One point's pre-flight failure (a served name the server does not list) fails that point
    only: it is recorded, the other runs, and the sweep exits 4."""
    with fake_in_thread(Plan(usage=dict(PLANTED))) as url:
        proc = run_llem(
            "model=hf",
            f"model.name_or_path={tiny_model_dir}",
            "device=cpu",
            "measurement.energy=none",
            *_overrides(url),
            "server.model=other,fake-model",
            multirun=True,
            cwd=tmp_path,
            timeout=300,
        )
    assert proc.returncode == 4, output(proc)
    by_model = {
        next(o.split("=")[1] for o in r["overrides"] if o.startswith("server.model=")): r
        for r in _results(tmp_path)
    }
    assert by_model["fake-model"]["status"] == "ok"
    failed = by_model["other"]
    assert failed["status"] == "failed" and failed["error"]["type"] == "PreflightError"
    assert "model 'other' is not served by" in failed["error"]["message"]


def test_preflight_names_a_launch_preset_this_interpreter_cannot_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from llem.backends.server import preflight
    from llem.config.engines import engine
    from llem.runner.preflight import engine_preflight

    monkeypatch.setitem(preflight.LAUNCH_PACKAGES, Launch.vllm, ("llem_never_installed", "HINT"))
    exp = ExperimentConfig(backend="server")
    exp.server.launch = Launch.vllm
    (problem,) = engine_preflight(exp, engine("server"), "cpu", False)
    assert problem.startswith("server.launch=vllm starts 'llem_never_installed' with this")
    assert problem.endswith("where it is not installed (HINT)")


@pytest.mark.slow
def test_a_sweep_keeps_the_server_across_points_that_share_it(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    with fake_in_thread(Plan(usage=dict(PLANTED))) as url:
        proc = run_llem(
            "model=hf",
            f"model.name_or_path={tiny_model_dir}",
            "device=cpu",
            "measurement.energy=none",
            *_overrides(url),
            "decoder.max_new_tokens=8,16",
            multirun=True,
            cwd=tmp_path,
            timeout=300,
        )
    assert proc.returncode == 0, output(proc)
    results = _results(tmp_path)
    assert len(results) == 2
    reused = sorted(r["lifecycle"]["model_reused"] for r in results)
    assert reused == [False, True]


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("sglang", "server.launch=sglang starts 'sglang' with this interpreter"),
        ("tgi", "server.launch=tgi starts 'text-generation-launcher', which is not on PATH"),
    ],
)
def test_sglang_and_tgi_presets_are_offered_and_checked_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, preset: str, expected: str
) -> None:
    """Neither SGLang nor TGI is installed here: pre-flight names what the preset starts."""
    from llem.config.engines import engine
    from llem.runner.preflight import engine_preflight

    monkeypatch.setenv("PATH", "/nonexistent")
    exp = ExperimentConfig(backend="server")
    exp.server.launch = Launch(preset)
    (problem,) = engine_preflight(exp, engine("server"), "cpu", False)
    assert problem.startswith(expected)

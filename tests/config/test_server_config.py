"""The ``server:`` section (llem.config.server) and its row in the engine table: exactly one of
url and launch, launch keys refused with a url, other engines' keys answered with the server's
equivalents, and bad input as one line with exit 2 from the command line."""

from __future__ import annotations

import pytest

from llem.config.config_hash import legacy_config_hash
from llem.config.engines import engine, engine_problems
from llem.config.schema import ExperimentConfig
from llem.config.server import Launch, ServerConfig
from llem.testing.cli import output
from llem.testing.forked_cli import run_llem

NEITHER = (
    "backend=server needs exactly one of server.url (a running server) and server.launch "
    "(vllm, llamacpp, sglang, tgi, command): neither is set"
)


def _server(**values: object) -> ExperimentConfig:
    exp = ExperimentConfig(backend="server")
    exp.server = ServerConfig(**values)  # type: ignore[arg-type]
    return exp


def test_neither_url_nor_launch_is_one_line() -> None:
    assert engine_problems(_server()) == [NEITHER]


def test_both_url_and_launch_is_one_line() -> None:
    (problem,) = engine_problems(_server(url="http://127.0.0.1:8000", launch=Launch.vllm))
    assert problem.endswith("both are set")


def test_a_url_or_a_launch_alone_passes() -> None:
    assert engine_problems(_server(url="http://127.0.0.1:8000")) == []
    assert engine_problems(_server(launch=Launch.vllm, max_num_seqs=8, args={"x": 1})) == []


def test_launch_keys_are_refused_with_a_url() -> None:
    # max_num_seqs is not one: with a url it states the running server's own limit
    exp = _server(url="http://127.0.0.1:8000", max_num_seqs=8, port=9000)
    assert engine_problems(exp) == [
        "server.port configures a launched server and does not apply to "
        "server.url=http://127.0.0.1:8000",
    ]


def test_gpus_are_refused_with_a_launch_and_a_bad_url_is_named() -> None:
    assert (
        "server.gpus is for a server" in engine_problems(_server(launch=Launch.vllm, gpus=[0]))[0]
    )
    assert engine_problems(_server(url="127.0.0.1:8000")) == [
        "server.url=127.0.0.1:8000: not an http:// or https:// URL"
    ]


def test_server_pids_name_a_running_servers_processes_only() -> None:
    assert engine_problems(_server(url="http://127.0.0.1:8000", pids=[4000, 4100])) == []
    assert engine_problems(_server(launch=Launch.vllm, pids=[4000])) == [
        "server.pids names the processes of a server that is already running (server.url); "
        "a launched server's processes are llem's own descendants"
    ]


def test_other_engines_keys_name_the_servers_equivalents() -> None:
    exp = _server(url="http://127.0.0.1:8000")
    exp.vllm.max_num_seqs = 16
    exp.vllm.tensor_parallel_size = 2
    exp.pytorch.batch_size = 4
    assert engine_problems(exp) == [
        "pytorch.batch_size=4 does not apply to backend=server (server equivalent: "
        "server.max_num_seqs; the server batches continuously)",
        "vllm.max_num_seqs=16 does not apply to backend=server (server equivalent: "
        "server.max_num_seqs)",
        "vllm.tensor_parallel_size=2 does not apply to backend=server (server equivalent: "
        "+server.args.tensor_parallel_size=VALUE with server.launch=vllm)",
    ]


def test_a_server_key_under_another_backend_names_plus_backend_server() -> None:
    exp = ExperimentConfig(backend="vllm")
    exp.server.url = "http://127.0.0.1:8000"
    assert engine_problems(exp) == [
        "server.url=http://127.0.0.1:8000 needs +backend=server (the backend is vllm)"
    ]


def test_the_row_serves_offline_traffic_and_runs_no_threads_of_ours() -> None:
    row = engine("server")
    assert row.offline_serves(ServerConfig()) is True
    assert row.threads_knob is None and row.threads_reason
    assert row.concurrency_knob == "server.max_num_seqs"


def test_an_unconfigured_server_section_leaves_the_config_hash_as_before() -> None:
    exp = ExperimentConfig()
    before = legacy_config_hash(exp)
    exp.server.url = "http://127.0.0.1:8000"
    assert legacy_config_hash(exp) != before
    assert before == legacy_config_hash(ExperimentConfig())


@pytest.mark.slow
def test_the_command_line_refuses_a_server_without_url_or_launch_in_one_line() -> None:
    proc = run_llem("+backend=server", "dry_run=true", timeout=120)
    assert proc.returncode == 2, output(proc)
    assert NEITHER in proc.stderr, output(proc)
    assert "Traceback" not in proc.stderr, output(proc)

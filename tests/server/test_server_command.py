"""``server.launch=command``: a server command of one's own (TensorRT-LLM's ``trtllm-serve``, a
container, a script), given as a template: its validation, how it is filled and pre-flighted,
and a whole run that starts it (the fake OpenAI server as a command), measures through it and
stops it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from llem.backends.server.commands import template_command
from llem.config.server import Launch, ServerConfig, server_problems
from llem.testing.cli import run_tiny

REPO = Path(__file__).resolve().parents[2]
CLI = "tests.server.fake_openai_cli"  # run as a module, the checkout on PYTHONPATH
TRT = "trtllm-serve {model} --host {host} --port {port}"


def _problems(**kw: object) -> list[str]:
    return server_problems(ServerConfig(**kw))  # type: ignore[arg-type]


def test_a_template_is_checked_before_anything_starts() -> None:
    assert _problems(launch=Launch.command, command=TRT) == []
    (line,) = _problems(launch=Launch.command)
    assert line.startswith("server.launch=command needs server.command")
    typo, no_port = _problems(launch=Launch.command, command="serve {model} --port {prot}")
    assert "{prot} is not a placeholder (allowed: {model}, {gguf}," in typo
    assert no_port.startswith("server.command has no {port}")
    (line,) = _problems(launch=Launch.command, command="serve '{model} --port {port}")
    assert line == (
        'server.command="serve \'{model} --port {port}": not a template (No closing quotation)'
    )
    (line,) = _problems(launch=Launch.command, command="serve {model}")
    assert line.startswith("server.command has no {port}")
    assert _problems(launch=Launch.command, command="serve {model}", port=8000) == []
    (line,) = _problems(launch=Launch.command, command=TRT + " --max_batch_size {max_num_seqs}")
    assert line == "server.command uses {max_num_seqs}: set server.max_num_seqs"
    (line,) = _problems(launch=Launch.vllm, command=TRT)
    assert line == "server.command is started by server.launch=command only (it is vllm)"
    (line,) = _problems(url="http://127.0.0.1:8000", command=TRT)
    assert line.startswith("server.command configures a launched server")
    (line,) = _problems(launch=Launch.command, command=TRT, args={"tp_size": 2})
    assert line.startswith("server.args are a preset's extra arguments")
    assert _problems(launch=Launch.command, command=TRT, gpus=[1]) == []  # its GPUs: named
    assert "server.gpus" in _problems(launch=Launch.vllm, gpus=[1])[0]


def test_a_template_is_filled_word_by_word_without_a_shell() -> None:
    values = {"model": "/m dir", "port": "8001", "host": "127.0.0.1", "served": "x", "gguf": None}
    spec = template_command("srv '{model}' --port={port} --name {served}; rm -rf /", values)
    assert spec.command == ("srv", "/m dir", "--port=8001", "--name", "x;", "rm", "-rf", "/")
    with pytest.raises(ValueError, match=r"\{gguf\} has no value"):
        template_command("srv {gguf} --port {port}", values)


@pytest.mark.slow
def test_a_run_starts_the_command_measures_through_it_and_stops_it(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    command = f"env PYTHONPATH={REPO} {sys.executable} -m {CLI} {{port}}"
    result = run_tiny(
        tiny_model_dir,
        tmp_path / "run",
        "+backend=server",
        "server.launch=command",
        f"server.command='{command}'",
        "server.model=fake-model",
        "traffic.n_requests=3",
        "measurement.warmup=0",
    )
    assert result["status"] == "ok", result.get("error")
    s = result["server"]
    assert s["launched"] and s["command"].startswith(f"env PYTHONPATH={REPO} ")
    assert s["launch_to_ready_s"] > 0 and s["version"] is None
    assert result["workload"]["output_tokens"] == 3 * 2  # the fake's planted usage
    assert "fake OpenAI server on" in Path(s["log"]).read_text()  # its log, kept
    assert not _running(CLI)  # stopped after the run


@pytest.mark.slow
def test_a_program_that_is_not_there_fails_preflight_with_its_name(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    from llem.errors import PreflightError

    with pytest.raises(PreflightError, match="server.command starts 'no-such-server', which is"):
        run_tiny(
            tiny_model_dir,
            tmp_path / "run",
            "+backend=server",
            "server.launch=command",
            "server.command='no-such-server {model} --port {port}'",
        )
    assert not os.path.exists(tmp_path / "run" / "server.log")  # nothing was started


def _running(word: str) -> list[int]:
    """The pids of the processes whose command line has ``word``."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if word.encode() in line:
            pids.append(int(entry.name))
    return pids

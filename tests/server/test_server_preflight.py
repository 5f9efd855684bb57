"""What ``+backend=server`` refuses at pre-flight, before anything loads (exit 3): a running
server that does not answer ``GET /v1/models`` within the pre-flight timeout, an API key variable
that is not set, and a launch preset this interpreter cannot start, with the recipe docs/engines.md
gives as its hint."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from llem.backends.server import preflight
from llem.config.engines import engine
from llem.config.schema import ExperimentConfig
from llem.config.server import Launch
from llem.runner.preflight import engine_preflight

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _refused_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_server_that_does_not_answer_is_refused_within_the_preflight_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A port that takes the connection and never answers: refused after the timeout (planted
    0.3 s here; ``PREFLIGHT_TIMEOUT_S``), never a hang."""
    monkeypatch.setattr(preflight, "PREFLIGHT_TIMEOUT_S", 0.3)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # the kernel completes the handshake; nobody reads or answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        exp = ExperimentConfig(backend="server")
        exp.server.url = url
        t0 = time.perf_counter()
        (problem,) = engine_preflight(exp, engine("server"), "cpu", False)
        waited = time.perf_counter() - t0
    assert problem == f"cannot connect to the server at {url}/v1/models (no answer within 0.3 s)"
    assert 0.3 <= waited < 3.0


def test_an_unset_api_key_variable_is_refused_at_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLEM_TEST_UNSET_KEY", raising=False)
    for where in ("url", "launch"):
        exp = ExperimentConfig(backend="server")
        if where == "url":
            exp.server.url = _refused_url()
        else:
            exp.server.launch = Launch.command
            exp.server.command = f"{sys.executable} -m http.server {{port}}"
        exp.server.api_key_env = "LLEM_TEST_UNSET_KEY"
        problems = engine_preflight(exp, engine("server"), "cpu", False)
        assert problems == [
            "server.api_key_env=LLEM_TEST_UNSET_KEY: the environment variable is not set"
        ], where


def test_the_llamacpp_hint_is_the_documented_build_script(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python missing: the hint is docs/engines.md's recipe for this interpreter's
    environment (the pinned, portable build), not an unpinned ``pip install``."""
    _, hint = preflight.LAUNCH_PACKAGES[Launch.llamacpp]
    # as if llama_cpp were not installed here, whether or not it is
    monkeypatch.setitem(preflight.LAUNCH_PACKAGES, Launch.llamacpp, ("llem_never_installed", hint))
    exp = ExperimentConfig(backend="server")
    exp.server.launch = Launch.llamacpp
    (problem,) = engine_preflight(exp, engine("server"), "cpu", False)
    recipe = "bash scripts/build_llamacpp.sh ~/.cache/llem/wheels"
    assert f"({recipe} {sys.prefix} builds the pinned version" in problem
    assert "pip install" not in problem
    documented = (DOCS / "engines.md").read_text(encoding="utf-8")
    assert f"\n{recipe} .venv\n" in documented

"""The run layer asks the engine's row (llem.config.engines), never its name: a planted third
engine gets its packages and pre-flight checked, its threads left alone with its reason, its
concurrency knob named, and its driver built, with nothing in llem naming it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from llem.backends import create_backend, sections, serves
from llem.config.schema import TrafficConfig, TrafficKind
from llem.result import RunResult
from llem.runner.preflight import collect_problems
from llem.runner.serving import _knob
from llem.runner.threads import settle_threads
from llem.testing import fake_engine
from llem.testing.fake_engine import FakeBackend, FakeConfig, with_section


@pytest.fixture(autouse=True)
def _fake(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_engine.plant(monkeypatch)


def test_preflight_checks_the_rows_packages_and_runs_its_preflight(tmp_path: Path) -> None:
    exp = with_section("fake", FakeConfig(slots=3))
    exp.model.name_or_path = str(tmp_path / "no-model")
    problems = collect_problems(exp, has_cuda=False)
    assert (
        f"backend=fake needs the Python package '{fake_engine.PACKAGE}' "
        f"(not installed; {fake_engine.INSTALL_HINT})"
    ) in problems
    assert "fake pre-flight: slots=3 device=cpu" in problems


def test_threads_are_left_to_an_engine_without_a_threads_knob() -> None:
    result = RunResult(status="ok")
    settle_threads(with_section("fake"), {}).record(result)
    assert result.hardware.torch_threads is None
    assert result.null_reasons["hardware.torch_threads"] == fake_engine.THREADS_REASON


def test_the_concurrency_knob_is_the_rows() -> None:
    assert _knob(with_section("fake"), TrafficConfig(), 4) == ("fake.slots", 4)


def test_the_driver_is_built_with_the_engines_own_section() -> None:
    section = FakeConfig(slots=5)
    backend = create_backend(with_section("fake", section))
    assert isinstance(backend, FakeBackend)
    assert backend.sections.engine is section
    assert backend.sections.serving is False


def test_offline_traffic_is_served_when_the_row_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    exp = with_section("fake")
    assert exp.traffic.kind == TrafficKind.offline and not serves(exp)
    fake_engine.plant(monkeypatch, fake_engine.row(offline_serves=lambda s: s.mode == "fast"))
    assert serves(exp) and sections(exp).serving
    setattr(exp, "fake", dataclasses.replace(FakeConfig(), mode="slow"))  # noqa: B010
    assert not serves(exp)

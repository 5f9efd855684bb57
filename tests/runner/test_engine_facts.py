"""The engine hands the run facts, and the run writes them and judges them: a planted engine's
section, stated device and the load it counted come out in result.json as planted, and the
run's own verdict on a surplus load (check ``server_load``) makes the energy invalid. The
device a server states is named by the vendor's library, not a literal."""

from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from llem.devices.gpu import GpuUnavailable
from llem.devices.nvidia import init_nvml
from llem.result import RunResult
from llem.runner.engine_facts import write_engine_facts
from llem.testing.clocks import SteppingClock
from llem.testing.fake_pynvml import FakeGpu, FakeNvml
from llem.vocabulary.facts import (
    DeviceStatement,
    EngineFacts,
    EngineLoad,
    LentGpus,
    SectionFacts,
    WindowFacts,
)
from llem.vocabulary.model import LoadedModel
from tests.speculative import test_speculative_energy as planted

URL = "http://127.0.0.1:9"
#: the planted server section as the engine opens it, and its null reasons
OPENING = SectionFacts(
    {"url": URL, "launched": False, "endpoint": "chat", "model": "planted-model"},
    {"server.version": "planted: no version", "server.requests_finished": "planted: no window"},
)
SENT = 2  # the planted engine's prompts per pass (llem's requests in the window)


@dataclass
class Facts(LoadedModel):
    """A loaded model whose facts are planted: ``finished`` requests the server counted."""

    finished: float = 0.0

    def engine_facts(self) -> EngineFacts:
        return EngineFacts(OPENING, DeviceStatement(False, "planted: the device is not known"))

    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        view = SectionFacts({"requests_finished": self.finished, "metrics_source": "vllm"})
        return WindowFacts(view, EngineLoad(SENT, self.finished, None, None))


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path, finished: float):
    def load(self: planted.Planted, device: str) -> LoadedModel:
        return Facts(
            None, self.tokenizer, "cpu", "float32", {}, "facts", 0.0, "f", None, finished=finished
        )

    monkeypatch.setattr(planted.Planted, "load", load)
    monkeypatch.setattr(planted.Planted, "batch_size", lambda self, loaded: SENT)
    monkeypatch.setattr(planted, "ACCEPTED", ())
    tmp_path.mkdir()
    replay = ("measurement.energy=replay", f"measurement.replay_trace={tmp_path / 'trace.csv'}")
    valid = "measurement.min_valid_window_s=0"  # the window is short: only the load may fail it
    return planted._run(tiny_model_dir, tmp_path, monkeypatch, *replay, valid)


def test_the_run_writes_the_engines_facts_and_judges_its_load(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = _run(tmp_path / "alone", monkeypatch, tiny_model_dir, finished=SENT)
    assert alone.server is not None
    assert (alone.server.url, alone.server.endpoint, alone.server.model) == (
        URL,
        "chat",
        "planted-model",
    )
    assert alone.server.requests_finished == SENT and alone.server.metrics_source == "vllm"
    assert alone.null_reasons["server.version"] == "planted: no version"
    assert "server.requests_finished" not in alone.null_reasons  # the window's figure replaced it
    assert alone.device is None
    assert alone.null_reasons["device"] == "planted: the device is not known"
    assert alone.validity.checks["server_load"] == "passed"
    assert alone.validity.energy_valid is True, alone.validity.problems

    busy = _run(tmp_path / "busy", monkeypatch, tiny_model_dir, finished=5)
    assert busy.validity.checks["server_load"] == "failed"
    assert busy.validity.energy_valid is False
    (problem,) = [p for p in busy.validity.problems if p.startswith("The server counted")]
    assert problem.startswith(f"The server counted 5 finished requests (llem sent {SENT})")


def _stated(opener: LentGpus) -> RunResult:
    result = RunResult(status="ok", device="cpu")
    write_engine_facts(result, EngineFacts(OPENING, DeviceStatement(True)), opener)
    return result


def test_a_stated_gpu_device_is_what_the_vendor_calls_its_gpus() -> None:
    """The vendor's library names the device (a toy vendor's ``hpu``; NVIDIA's ``cuda``); with no
    library at all the run cannot tell the vendor and says ``cuda``, as it always did."""
    toy = types.SimpleNamespace(torch_device_type="hpu", shutdown=lambda: None)
    assert _stated(lambda: toy).device == "hpu"
    nvidia = _stated(lambda: init_nvml(FakeNvml([FakeGpu("GPU-a")], SteppingClock())))
    assert nvidia.device == "cuda" and "device" not in nvidia.null_reasons

    def none() -> object:
        raise GpuUnavailable("planted: no library")

    assert _stated(none).device == "cuda"

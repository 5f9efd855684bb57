"""The check that llem measured every GPU an engine ran on, fed by any engine: its loaded model
says which GPUs its processes held (``LoadedModel.window_facts``), the run judges them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from llem.measure.engine_gpus import judge_engine_gpus
from llem.result import Figure, GpuRecord, RunResult
from llem.vocabulary.facts import EngineProcesses, HeldGpus, LentGpus, WindowFacts
from llem.vocabulary.model import EngineGpus, LoadedModel

TOY = EngineGpus(["GPU-a", "GPU-c"], cover="give the toy all of them", who="the toy engine")


def _result(measured: list[str]) -> RunResult:
    result = RunResult(status="ok")
    result.hardware.gpus = [GpuRecord(uuid=u, name="fake") for u in measured]
    result.set_figure("validity.energy_valid", Figure(True))
    return result


def test_an_engine_gpu_llem_did_not_measure_invalidates_the_energy_in_its_words() -> None:
    result = _result(["GPU-a", "GPU-b"])
    judge_engine_gpus(result, "toy", TOY)
    v = result.validity
    assert v.energy_valid is False and v.checks["toy_gpus"] == "failed"
    assert v.problems == [
        "the toy engine runs on GPU(s) GPU-c, which llem did not measure: its work there is "
        "missing from the energy (give the toy all of them)"
    ]
    assert v.conditions == [
        "GPU(s) GPU-b were measured but the toy engine has no process on them: their idle power "
        "is in the figures"
    ]


def test_every_gpu_measured_passes_and_unknown_gpus_are_not_checked() -> None:
    result = _result(["GPU-c", "GPU-a"])
    judge_engine_gpus(result, "toy", TOY)
    assert result.validity.checks["toy_gpus"] == "passed" and result.validity.energy_valid
    unknown = _result(["GPU-a"])
    judge_engine_gpus(unknown, "toy", EngineGpus(None, "planted: no listing"))
    assert unknown.validity.checks["toy_gpus"] == "not checked"
    assert unknown.validity.energy_valid is True and unknown.validity.problems == []


@dataclass
class ToyModel(LoadedModel):
    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        held = HeldGpus(TOY.uuids)
        return WindowFacts(processes=EngineProcesses("planted", held, TOY.cover, TOY.who))


def test_the_run_judges_what_the_engine_says_it_used(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.runner import test_quality_run as planted

    def load(self: planted.PlantedAnswers, device: str) -> LoadedModel:
        return ToyModel(None, self.tokenizer, "cpu", "float32", {}, "toy", 0.0, "toy", None)

    monkeypatch.setattr(planted.PlantedAnswers, "load", load)
    result, _, _ = planted._run(tiny_model_dir, tmp_path, monkeypatch)
    # a replayed trace measures no GPU: both of the toy's are unmeasured
    assert result.validity.checks["pytorch_gpus"] == "failed"
    assert result.validity.energy_valid is False
    assert any("the toy engine runs on GPU(s) GPU-a, GPU-c" in p for p in result.validity.problems)

"""J per accepted draft token: a run through the Runner on a replayed GPU trace of constant
power, with an engine whose speculative section is planted (the PyTorch engine's count, filled
after the window as the engine fills it), so the figure's truth is the trace's power times the
window over the planted accepted tokens."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import llem.runner.runner as runner_module
from llem.backends.pytorch.speculation import RequestCount, Speculation
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.config.validate import to_experiment
from llem.result import RunResult
from llem.runner import Runner
from llem.testing.cli import compose_tiny
from llem.vocabulary.facts import LentGpus, WindowFacts
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import BatchOutput, Prompt

POWER_W = 150.0  # the replayed trace
ACCEPTED = (4, 6)  # per request: the planted accepted draft tokens (10 in all)


@dataclass
class Counted(LoadedModel):
    """A loaded model whose window's speculation is planted."""

    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        spec = SpeculativeConfig(method=SpeculativeMethod.ngram, num_tokens=3)
        requests = [
            RequestCount(proposed=9, accepted=a, steps=5, with_proposals=3, generated=a + 5)
            for a in ACCEPTED
        ]
        return WindowFacts(speculative=Speculation(spec, False, requests).facts())


class Planted:
    """An engine whose every generate call gives 3 tokens per prompt after 0.05 s."""

    name = "pytorch"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def load_key(self, device: str) -> str:
        return "planted"

    def torch_device_indices(self) -> list[int]:
        return []

    def measures_named_gpus(self, measurement: object) -> bool:
        return False

    def energy_refusal(self, measurement: object) -> str | None:
        return None

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        return [list(prompts)]

    def batch_size(self, loaded: LoadedModel) -> int:
        return 2

    def load(self, device: str) -> LoadedModel:
        return Counted(None, self.tokenizer, "cpu", "float32", {}, "fake", 0.0, "fake", None)

    def warm_up(self, loaded: LoadedModel, batches: Any, n_batches: int) -> None:
        pass

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        start = time.perf_counter()
        time.sleep(0.05)
        end = time.perf_counter()
        n = len(prompts)
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[5] * n,
            output_tokens=[3] * n,
            step_times_s=[start + 0.01, start + 0.02, end],
            step_tokens=[1, 1, 1],
        )

    def unload(self, loaded: LoadedModel | None) -> None:
        pass


def _run(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str):
    from llem.testing.tinymodel import tiny_tokenizer

    trace = tmp_path / "trace.csv"
    trace.write_text(f"time_s,device,power_w\n0,g,{POWER_W}\n100000,g,{POWER_W}\n")
    exp = to_experiment(
        compose_tiny(
            tiny_model_dir,
            "measurement.warmup=0",
            "measurement.cooldown_s=0",
            "measurement.idle_baseline_s=0",
            "measurement.min_window_s=0.05",
            *(extra or ("measurement.energy=replay", f"measurement.replay_trace={trace}")),
        )
    )
    monkeypatch.setattr(
        runner_module, "create_backend", lambda exp, run_dir: Planted(tiny_tokenizer())
    )
    Runner().run(exp, tmp_path / "run")
    return RunResult.from_json(tmp_path / "run" / "result.json")


def test_j_per_accepted_draft_token_is_the_windows_energy_over_the_accepted_tokens(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _run(tiny_model_dir, tmp_path, monkeypatch)
    s, e = written.speculative, written.energy
    assert s is not None and s.draft_tokens_accepted == sum(ACCEPTED)
    assert e.window_s is not None and e.total_j is not None
    # the truth: the trace's constant power over the window, on the planted tokens
    truth = POWER_W * e.window_s / sum(ACCEPTED)
    assert s.j_per_accepted_draft_token == pytest.approx(truth, rel=1e-3)
    assert e.total_j_uncertainty is not None
    assert s.j_per_accepted_draft_token_uncertainty == pytest.approx(
        e.total_j_uncertainty / sum(ACCEPTED)
    )
    assert "speculative.j_per_accepted_draft_token" not in written.null_reasons


def test_without_energy_it_is_null_with_the_energys_reason(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _run(tiny_model_dir, tmp_path, monkeypatch, "measurement.energy=none")
    s = written.speculative
    assert s is not None and s.j_per_accepted_draft_token is None
    why = written.null_reasons["speculative.j_per_accepted_draft_token"]
    assert why == f"energy.total_j is null: {written.null_reasons['energy.total_j']}"

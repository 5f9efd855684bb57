"""A toy in-process engine made of what CONTRIBUTING's checklist names, and nothing else: a config
section (a dataclass), one schema field (a subclass of the schema here), a driver (a module with
``create_backend``) and one row in the engine table. A measured run goes through it end to end,
and its section stays out of every other configuration's hash."""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any

import pytest

from llem.config import engines
from llem.config.config_hash import config_hash
from llem.config.engines import Engine
from llem.config.schema import ExperimentConfig
from llem.config.validate import to_experiment
from llem.runner import Runner
from llem.testing.cli import compose_tiny
from llem.vocabulary.engine import BackendSections
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import BatchOutput, Prompt

pytestmark = pytest.mark.slow  # loads the tiny tokenizer and measures a window

POWER_W = 100.0
TOKENS = 3  # each answer's tokens


@dataclass
class ToyConfig:
    """The toy's section (``toy:``): how many prompts go in one call."""

    batch: int = 2


class ToyBackend:
    """Answers every prompt with TOKENS tokens after 10 ms per call."""

    name = "toy"

    def __init__(self, sections: BackendSections[ToyConfig]) -> None:
        self.sections = sections
        self.config = sections.engine

    def load_key(self, device: str) -> str:
        return f"toy:{self.sections.model.name_or_path}"

    def torch_device_indices(self) -> list[int]:
        return []

    def measures_named_gpus(self, measurement: object) -> bool:
        return False

    def energy_refusal(self, measurement: object) -> str | None:
        return None

    def load(self, device: str) -> LoadedModel:
        from llem.testing.tinymodel import tiny_tokenizer

        return LoadedModel(None, tiny_tokenizer(), "cpu", "float32", {}, "toy", 0.0, "toy", None)

    def warm_up(self, loaded: LoadedModel, batches: Any, n_batches: int) -> None:
        pass

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        n = self.config.batch
        return [list(prompts[i : i + n]) for i in range(0, len(prompts), n)]

    def batch_size(self, loaded: LoadedModel) -> int:
        return self.config.batch

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        start = time.perf_counter()
        time.sleep(0.01)
        end = time.perf_counter()
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[4] * len(prompts),
            output_tokens=[TOKENS] * len(prompts),
            step_times_s=[start + 0.003, start + 0.006, end],
            step_tokens=[len(prompts)] * 3,
        )

    def unload(self, loaded: LoadedModel | None) -> None:
        pass


ROW = Engine(
    name="toy",
    section="toy",
    config=ToyConfig,
    driver="llem_toy_engine",
    packages=("json",),
    concurrency_knob="toy.batch",
    threads_reason="the toy sets no threads",
)


def plant(monkeypatch: pytest.MonkeyPatch) -> type[ExperimentConfig]:
    """The row in the table, the driver importable, and the schema with the toy's field."""
    monkeypatch.setattr(engines, "ENGINES", (*engines.ENGINES, ROW))
    driver = types.ModuleType(ROW.driver)
    setattr(driver, "create_backend", ToyBackend)  # noqa: B010 (a module built here)
    monkeypatch.setitem(sys.modules, ROW.driver, driver)
    schema = make_dataclass(
        "WithToy", [("toy", ToyConfig, field(default_factory=ToyConfig))], bases=(ExperimentConfig,)
    )
    return schema  # type: ignore[no-any-return]


def test_a_measured_run_goes_through_the_toy_engine(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(f"time_s,device,power_w\n0,g,{POWER_W}\n100000,g,{POWER_W}\n")
    base = to_experiment(
        compose_tiny(
            tiny_model_dir,
            "dataset.n_prompts=4",
            "measurement.warmup=0",
            "measurement.cooldown_s=0",
            "measurement.idle_baseline_s=0",
            "measurement.energy=replay",
            f"measurement.replay_trace={trace}",
        )
    )
    plain_hash = config_hash(base)
    toy = plant(monkeypatch)  # after composing: a config without the toy's section is refused
    exp = toy(**{f.name: getattr(base, f.name) for f in fields(ExperimentConfig)})
    assert config_hash(exp) == plain_hash  # the toy's section, not active: no hash moves
    exp.backend = "toy"
    exp.toy = ToyConfig(batch=2)  # type: ignore[attr-defined]
    result = Runner().run(exp, tmp_path / "run")
    assert result.status == "ok" and result.backend == "toy"
    assert result.workload.batch_size == 2
    assert result.workload.output_tokens == TOKENS * 4 * (result.workload.passes or 0)
    window_s = result.energy.window_s
    assert window_s is not None and result.energy.total_j == pytest.approx(
        POWER_W * window_s, rel=1e-4
    )
    assert result.hardware.torch_threads is None
    assert result.null_reasons["hardware.torch_threads"] == "the toy sets no threads"

"""The draft's energy against the verification's through a real run (the Runner, its
measurement session, the result's writer) on a replayed power trace planted with a known draft
power and verification power: an engine whose drafts and verifications run exactly when the
trace draws their powers, so the truth is each power times its seconds in the window."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import llem.runner.runner as runner_module
from llem.backends.pytorch.speculation import RequestCount, Speculation
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.config.validate import to_experiment
from llem.measure.session import MeasurementSession
from llem.result import RunResult
from llem.runner import Runner
from llem.testing.cli import compose_tiny
from llem.vocabulary.facts import LentGpus, WindowFacts
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.speculation import DraftSpans
from llem.vocabulary.workload import BatchOutput, Prompt

DRAFT_W, VERIFY_W, IDLE_W = 240.0, 410.0, 65.0
TRACE_S = 120.0  # trace seconds planted (the run lasts a few)


def _cycles(seed: int = 0) -> list[tuple[float, float, float]]:
    """(draft start, draft end = verification start, verification end), trace seconds: k
    varies every 20 steps, so drafts of 2-26 ms and verifications of 16-24 ms."""
    rng = random.Random(seed)
    out, t, k = [], 0.0, 1
    for i in range(int(TRACE_S / 0.02)):
        if i % 20 == 0:
            k = rng.randint(0, 8)
        d = t + 0.002 + 0.003 * k
        v = d + 0.016 + 0.001 * k
        out.append((t, d, v))
        t = v + 0.002
        if t > TRACE_S:
            break
    return out


CYCLES = _cycles()


def _trace(path: Path) -> None:
    rows = ["time_s,device,power_w", f"0,g,{IDLE_W}"]
    for a, d, v in CYCLES:
        rows += [f"{a!r},g,{IDLE_W}", f"{a!r},g,{DRAFT_W}", f"{d!r},g,{DRAFT_W}"]
        rows += [f"{d!r},g,{VERIFY_W}", f"{v!r},g,{VERIFY_W}", f"{v!r},g,{IDLE_W}"]
    path.write_text("\n".join(rows) + "\n")


@dataclass
class Drafting(LoadedModel):
    """A loaded model whose window's drafts are those the trace planted."""

    spans: list[tuple[float, float, float]] = field(default_factory=list)

    def window_facts(self, run_dir: Path, gpus: LentGpus, measured: Sequence[str]) -> WindowFacts:
        spec = SpeculativeConfig(method=SpeculativeMethod.draft, num_tokens=8, draft_model="d")
        n = len(self.spans)
        count = RequestCount(proposed=4 * n, accepted=2 * n, steps=n, generated=3 * n)
        count.draft_spans = [(a, d) for a, d, _ in self.spans]
        count.verification_spans = [(d, v) for _, d, v in self.spans]
        spec_run = Speculation(spec, False, [count])
        spans = spec_run.spans()
        assert isinstance(spans, DraftSpans)
        return WindowFacts(speculative=spec_run.facts(), draft_spans=spans)


class Planted:
    """An engine whose generate call lasts 0.3 s and reports the trace's cycles inside it."""

    name = "pytorch"

    def __init__(self, tokenizer: Any, origin: dict[str, float]) -> None:
        self.tokenizer, self.origin = tokenizer, origin
        self.loaded: Drafting | None = None

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
        return 1

    def load(self, device: str) -> LoadedModel:
        self.loaded = Drafting(
            None, self.tokenizer, "cpu", "float32", {}, "fake", 0.0, "fake", None
        )
        return self.loaded

    def warm_up(self, loaded: LoadedModel, batches: Any, n_batches: int) -> None:
        pass

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        start = time.perf_counter()
        time.sleep(0.3)
        end = time.perf_counter()
        o = self.origin["s"]
        assert isinstance(loaded, Drafting)
        loaded.spans += [
            (a + o, d + o, v + o) for a, d, v in CYCLES if start <= a + o and v + o <= end
        ]
        n = len(prompts)
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[5] * n,
            output_tokens=[3] * n,
            step_times_s=[start + 0.1, start + 0.2, end],
            step_tokens=[1, 1, 1],
        )

    def unload(self, loaded: LoadedModel | None) -> None:
        pass


def _run(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from llem.testing.tinymodel import tiny_tokenizer

    trace = tmp_path / "trace.csv"
    _trace(trace)
    origin: dict[str, float] = {}
    start = MeasurementSession.start

    def started(self: MeasurementSession) -> Any:
        got = start(self)
        origin["s"] = float(self.origin_s or 0.0)  # the trace's time 0
        return got

    monkeypatch.setattr(MeasurementSession, "start", started)
    engine = Planted(tiny_tokenizer(), origin)
    monkeypatch.setattr(runner_module, "create_backend", lambda exp, run_dir: engine)
    exp = to_experiment(
        compose_tiny(
            tiny_model_dir,
            "measurement.warmup=0",
            "measurement.cooldown_s=0",
            "measurement.idle_baseline_s=0",
            "measurement.min_window_s=0.5",
            "measurement.energy=replay",
            f"measurement.replay_trace={trace}",
        )
    )
    Runner().run(exp, tmp_path / "run")
    assert engine.loaded is not None
    return RunResult.from_json(tmp_path / "run" / "result.json"), engine.loaded.spans


def test_the_draft_and_verification_energy_are_the_planted_powers_over_their_seconds(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written, spans = _run(tiny_model_dir, tmp_path, monkeypatch)
    s, e = written.speculative, written.energy
    assert s is not None and e.total_j is not None and len(spans) > 10
    draft_s = sum(d - a for a, d, _ in spans)
    verify_s = sum(v - d for _, d, v in spans)
    assert s.draft_s == pytest.approx(draft_s, abs=1e-5)
    assert s.verification_s == pytest.approx(verify_s, abs=1e-5)
    truth_draft, truth_verify = DRAFT_W * draft_s, VERIFY_W * verify_s
    assert s.draft_energy_j == pytest.approx(truth_draft, rel=1e-4)
    assert s.verification_energy_j == pytest.approx(truth_verify, rel=1e-4)
    assert s.draft_energy_j_ci95_half_width is not None
    assert abs(s.draft_energy_j - truth_draft) <= s.draft_energy_j_ci95_half_width + 1e-6
    assert s.draft_energy_j_uncertainty is not None
    assert s.draft_energy_fraction == pytest.approx(truth_draft / e.total_j, rel=1e-4)
    assert s.draft_j_per_accepted_draft_token == pytest.approx(
        truth_draft / s.draft_tokens_accepted, rel=1e-4
    )
    assert s.draft_energy_method is not None and s.draft_energy_method.startswith("per span")
    for name in ("draft_energy_j", "verification_energy_j", "draft_energy_fraction"):
        assert f"speculative.{name}" not in written.null_reasons
    # the existing figure stands: the whole window over the accepted tokens
    assert s.j_per_accepted_draft_token == pytest.approx(e.total_j / s.draft_tokens_accepted)

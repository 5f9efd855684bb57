"""Scored runs end to end on an engine whose answers are planted: the quality section,
requests.jsonl's correctness per request and J per correct answer against a replayed power trace.

The fake engine answers each prompt with the text planted for it; which answers are right is
planted too (``RIGHT``), so every count below is known before the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import llem.runner.runner as runner_module
from llem.config.validate import to_experiment
from llem.quality.interval import over_items
from llem.result import RunResult, read_requests
from llem.runner import Runner
from llem.testing.cli import compose_tiny
from llem.vocabulary.model import LoadedModel
from llem.vocabulary.workload import (
    BatchOutput,
    Prompt,
    RequestTimeline,
    ScheduledRequest,
    ServeOutput,
)

# prompt, reference, the planted answer; scorer=exact
PLANTED = [
    ("What is 2 + 2?", "4", "4"),  # right
    ("Name the capital of France.", "Paris", "London"),  # wrong
    ("What is 3 * 3?", "9", "9."),  # right: a trailing full stop is ignored
    ("What colour is the sky?", "blue", "It is blue"),  # wrong: exact needs the whole answer
]
RIGHT = {0, 2}
POWER_W = 150.0
BATCH_S = 0.02  # each generate call's duration


class PlantedAnswers:
    """An engine that answers every prompt with its planted text after ``BATCH_S``."""

    name = "pytorch"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.calls = 0

    def load_key(self, device: str) -> str:
        return "planted"

    def torch_device_indices(self) -> list[int]:
        return []

    def measures_named_gpus(self, measurement: object) -> bool:
        return False

    def energy_refusal(self, measurement: object) -> str | None:
        return None

    def batches(self, prompts: Sequence[Prompt]) -> list[list[Prompt]]:
        return [list(prompts[i : i + 2]) for i in range(0, len(prompts), 2)]

    def batch_size(self, loaded: LoadedModel) -> int:
        return 2

    def load(self, device: str) -> LoadedModel:
        return LoadedModel(None, self.tokenizer, "cpu", "float32", {}, "fake", 0.0, "fake", None)

    def warm_up(self, loaded: LoadedModel, batches: Any, n_batches: int) -> None:
        pass

    def generate(self, loaded: LoadedModel, prompts: Sequence[Prompt]) -> BatchOutput:
        self.calls += 1
        start = time.perf_counter()
        time.sleep(BATCH_S)
        index = {p: i for i, (p, _, _) in enumerate(PLANTED)}
        texts = [PLANTED[index[str(p.text)]][2] for p in prompts]
        end = time.perf_counter()
        n = len(prompts)
        return BatchOutput(
            start_s=start,
            end_s=end,
            input_tokens=[5] * n,
            output_tokens=[3] * n,
            step_times_s=[start + 0.005, start + 0.01, end],
            step_tokens=[1, 1, 1],
            texts=texts,
        )

    def serve(
        self, loaded: LoadedModel, requests: Sequence[ScheduledRequest], max_concurrency: Any
    ) -> ServeOutput:
        """Every request answered with its prompt's planted text, one after another; in the
        reverse of the schedule's order, so a scorer that read answers by position would fail."""
        start = time.perf_counter()
        timelines = []
        for r in reversed(requests):
            sent = time.perf_counter()
            time.sleep(0.005)
            timelines.append(
                RequestTimeline(
                    request_id=r.request_id,
                    prompt_index=r.prompt_index,
                    arrival_s=sent,
                    scheduled_s=None,
                    sent_s=sent,
                    chunk_times_s=[sent + 0.002, time.perf_counter()],
                    chunk_tokens=[1, 2],
                    input_tokens=5,
                    text=PLANTED[r.prompt_index][2],
                )
            )
        return ServeOutput(start, time.perf_counter(), timelines, "actual send")

    def unload(self, loaded: LoadedModel | None) -> None:
        pass


def _run(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> tuple[RunResult, PlantedAnswers, Path]:
    from llem.testing.tinymodel import tiny_tokenizer

    data = tmp_path / "task.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": p, "reference": r}) + "\n" for p, r, _ in PLANTED)
    )
    trace = tmp_path / "trace.csv"
    trace.write_text(f"time_s,device,power_w\n0,g,{POWER_W}\n100000,g,{POWER_W}\n")
    overrides = [
        "dataset=jsonl",
        f"dataset.path={data}",
        "dataset.scorer=exact",
        "dataset.chat_template=false",
        "measurement.warmup=0",
        "measurement.cooldown_s=0",
        "measurement.idle_baseline_s=0",
        *extra,
    ]
    if not any(o.startswith("measurement.energy=") for o in extra):
        overrides += ["measurement.energy=replay", f"measurement.replay_trace={trace}"]
    exp = to_experiment(compose_tiny(tiny_model_dir, *overrides))
    fake = PlantedAnswers(tiny_tokenizer())
    monkeypatch.setattr(runner_module, "create_backend", lambda exp, run_dir: fake)
    run_dir = tmp_path / "run"
    return Runner().run(exp, run_dir), fake, run_dir


def test_every_answer_of_the_window_is_scored_and_each_correct_one_costs_its_share(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a window stretched over several passes (4 prompts in 2 batches of 0.02 s each, at least
    # 0.4 s): every pass's answers are scored, against the energy of the whole window. A pass
    # is 0.04 s planted plus what the machine adds; 0.4 s leaves room for a busy machine's
    # 0.36 s, where 0.1 s left 0.06 s before the window held a single pass
    result, fake, run_dir = _run(
        tiny_model_dir, tmp_path, monkeypatch, "measurement.min_window_s=0.4"
    )
    passes = result.workload.passes
    assert result.status == "ok" and passes is not None and passes >= 2
    assert fake.calls == 2 * passes
    q = result.quality
    assert q is not None
    assert (q.task, q.metric, q.n_answers, q.n_correct) == (
        "jsonl",
        "accuracy",
        4 * passes,
        2 * passes,
    )
    assert q.value == 0.5 and q.n_unreadable == 0 and q.n_items == 4
    assert q.ci95_low is not None and q.ci95_high is not None
    assert q.ci95_low < 0.5 < q.ci95_high and "over items" in q.interval_method
    # the interval is the 4 items', whatever the passes: 2 of 4 items right, each pass repeating
    one_pass = over_items([(1, 1), (1, 1), (0, 1), (0, 1)])
    assert one_pass is not None
    assert (q.ci95_low, q.ci95_high) == pytest.approx((one_pass.low, one_pass.high))
    # replayed constant power: the window's energy is POWER_W x its length (window_s is
    # rounded to the microsecond in result.json)
    window_s = result.energy.window_s
    assert window_s is not None and result.energy.total_j == pytest.approx(
        POWER_W * window_s, rel=1e-4
    )
    assert q.j_per_correct_answer == pytest.approx(POWER_W * window_s / (2 * passes), rel=1e-4)
    assert q.correct_answers_per_kj == pytest.approx(
        2 * passes / (POWER_W * window_s / 1000), rel=1e-4
    )
    assert q.scoring_s is not None and q.scoring_s >= 0
    # requests.jsonl: each request's verdict, by the prompt it was given
    records = read_requests(run_dir)
    assert len(records) == 4 * passes
    for r in records:
        assert r.correct == (r.prompt_index in RIGHT), r
    assert [r.extracted for r in records[:4]] == ["4", "london", "9", "it is blue"]
    # and the file agrees with what result.json says
    written = json.loads((run_dir / "result.json").read_text())
    assert written["quality"]["n_correct"] == 2 * passes
    assert written["schema_version"] == 8


def test_without_energy_j_per_correct_answer_is_null_with_the_reason(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _, _ = _run(tiny_model_dir, tmp_path, monkeypatch, "measurement.energy=none")
    q = result.quality
    assert q is not None and q.value == 0.5 and q.n_answers == 4
    assert q.j_per_correct_answer is None and q.correct_answers_per_kj is None
    assert result.null_reasons["quality.j_per_correct_answer"]


@pytest.mark.slow
def test_a_run_that_scores_nothing_has_a_null_quality_section_with_the_reason(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _, run_dir = _run(tiny_model_dir, tmp_path, monkeypatch, "dataset.scorer=null")
    assert result.quality is None
    assert "no references" in result.null_reasons["quality"]
    assert all(r.correct is None for r in read_requests(run_dir))


def test_a_served_workload_is_scored_by_each_request_s_own_prompt(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = [
        "pytorch.batching=continuous",
        "traffic=concurrency",
        "traffic.max_concurrency=2",
        "traffic.n_requests=6",
    ]
    result, _, run_dir = _run(tiny_model_dir, tmp_path, monkeypatch, *served)
    records = read_requests(run_dir)
    assert len(records) == 6 and {r.prompt_index for r in records} == {0, 1, 2, 3}
    right = sum(r.prompt_index in RIGHT for r in records)
    q = result.quality
    assert q is not None and (q.n_answers, q.n_correct) == (6, right)
    for r in records:
        assert r.correct == (r.prompt_index in RIGHT), r


def test_a_scored_jsonl_file_is_read_once_per_run(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pre-flight counts its prompts and checks its references, the run loads its prompts and the
    # task its references: four readings of one file, where one says everything
    opened: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == "task.jsonl" and (args[0] if args else kwargs.get("mode", "r")) == "r":
            opened.append(self)  # read, not written
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    result, _, _ = _run(tiny_model_dir, tmp_path, monkeypatch)
    assert result.status == "ok" and result.quality is not None
    assert len(opened) == 1

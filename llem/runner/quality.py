"""After the window: every request's answer judged against its prompt's reference, the run's
``quality`` section, and each request's correctness in requests.jsonl.

Scoring runs once the measured window has closed and its energy is read, so its time is never in
the window; ``quality.scoring_s`` records it apart. Every request of the window is scored (each
pass of a window stretched to ``measurement.min_window_s`` included), so the correct answers and
the energy they are divided into come from the same window. A request whose text is missing (an
engine that kept none) counts as wrong and unreadable: it was generated and measured.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

from llem.quality.figures import quality_figures
from llem.quality.scorers import Score
from llem.quality.task import Task
from llem.result import Figure, Quality, RunResult, read_requests, write_requests
from llem.runner.serving import Served

NOT_SCORED = (
    "nothing was scored: the run's prompts have no references (dataset=arithmetic, "
    "dataset=lm_eval, or dataset=jsonl with dataset.scorer set score them)"
)


def answers(ran: Served) -> Iterator[tuple[int, int, str | None]]:
    """Each request of the window as (request id, prompt index, generated text), with the ids
    and indices requests.jsonl gives them."""
    if ran.served is not None:
        for t in ran.served.requests:
            yield t.request_id, t.prompt_index, t.text
        return
    k = 0
    for batch in ran.outputs:
        texts = batch.texts if batch.texts is not None else [None] * len(batch.output_tokens)
        for text in texts:
            yield k, k % ran.n_prompts if ran.n_prompts > 0 else k, text
            k += 1


def fill_quality(result: RunResult, task: Task | None, ran: Served, run_dir: Path) -> None:
    """Score the window's answers with ``task`` and write the quality section; with no task the
    section is null with the reason."""
    if task is None:
        result.quality = None
        result.null_reasons["quality"] = NOT_SCORED
        return
    t0 = time.perf_counter()
    scored: dict[int, Score] = {}
    item_of: dict[int, int] = {}
    for request_id, prompt_index, text in answers(ran):
        scored[request_id] = (
            task.score(prompt_index, text) if text is not None else Score(False, None)
        )
        item_of[request_id] = prompt_index
    _mark_requests(run_dir, scored)
    energy = result.figure("energy.total_j")
    figures = quality_figures(
        task.metric,
        list(scored.values()),
        energy.value,
        energy.bound,
        energy.null_reason or "no energy was measured",
        items=[item_of[r] for r in scored],
    )
    low, high = figures.ci95 if figures.ci95 is not None else (None, None)
    reasons = figures.null_reasons
    section = Quality(
        task=task.name,
        metric=task.metric,
        scorer=task.scorer,
        n_answers=figures.n_answers,
        n_items=figures.n_items,
        n_correct=figures.n_correct,
        n_unreadable=sum(1 for s in scored.values() if s.extracted is None),
        interval_method=figures.interval_method,
        scoring_s=round(time.perf_counter() - t0, 6),
    )
    result.quality = section
    result.null_reasons.pop("quality", None)
    why_no_interval = reasons.get("value", "no request was scored")
    result.set_figures(
        "quality",
        {
            "value": Figure.of(figures.value, reasons.get("value")),
            "ci95_low": Figure.of(low, why_no_interval),
            "ci95_high": Figure.of(high, why_no_interval),
            "j_per_correct_answer": Figure.of(
                figures.j_per_correct_answer,
                reasons.get("j_per_correct_answer"),
                figures.j_per_correct_answer_bound,
                reasons.get("j_per_correct_answer_bound"),
            ),
            "correct_answers_per_kj": Figure.of(
                figures.correct_per_kj, reasons.get("correct_per_kj")
            ),
        },
    )


def _mark_requests(run_dir: Path, scored: dict[int, Score]) -> None:
    """requests.jsonl with each request's ``correct`` and ``extracted``."""
    path = run_dir / "requests.jsonl"
    if not path.exists():
        return
    records = [
        dataclasses.replace(r, correct=s.correct, extracted=s.extracted)
        if (s := scored.get(r.request_id)) is not None
        else r
        for r in read_requests(run_dir)
    ]
    write_requests(run_dir, records)

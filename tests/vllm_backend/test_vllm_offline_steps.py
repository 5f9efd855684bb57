"""The offline engine's stepping loop on a stand-in ``LLMEngine`` (no vLLM): each step's
scheduler totals reach the steps (a step of prefill chunks only included), and the texts are
kept when asked for."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

from llem.backends.vllm.offline import _step_until_done
from llem.backends.vllm.steps import OfflineSteps
from llem.vocabulary.workload import StepShare


class Processor:
    def update_scheduler_stats(self, stats: Any) -> None:
        pass


class Engine:
    """Plays vLLM 0.32's ``LLMEngine.step``: hands each step's ``SchedulerStats`` to its output
    processor, then returns the step's ``RequestOutput`` deltas ([] for a chunk-only step)."""

    def __init__(self, script: list[tuple[int, int, list[tuple[str, str]]]]) -> None:
        self.script = list(script)
        self.output_processor = Processor()

    def has_unfinished_requests(self) -> bool:
        return bool(self.script)

    def step(self) -> list[Any]:
        ctx, gen, outs = self.script.pop(0)
        details = NS(num_ctx_tokens=ctx, num_generation_tokens=gen, is_dummy=False)
        self.output_processor.update_scheduler_stats(NS(iteration_details=details))
        return [
            NS(
                request_id=rid,
                num_cached_tokens=0,
                outputs=[NS(token_ids=[1], text=text, finish_reason="length")],
            )
            for rid, text in outs
        ]


def test_chunk_only_steps_are_steps_and_texts_are_kept() -> None:
    engine = Engine(
        [
            (64, 0, []),  # a chunk of the 100-token prompt, no output
            (36, 0, [("a", "Hel")]),  # the last chunk and the first token
            (0, 1, [("a", "lo")]),
        ]
    )
    log = OfflineSteps(0.0)
    run = _step_until_done(engine, ["a"], log, keep_text=True)
    assert run.texts == ["Hello"] and run.counts == [[1, 1]]
    steps, placed = log.engine_steps([100], [100])
    assert [s.shares for s in steps] == [
        (StepShare(0, 64, 0),),
        (StepShare(0, 36, 1),),
        (StepShare(0, 0, 1),),
    ]
    assert "placed in the steps that computed them" in placed.note


def test_texts_are_not_kept_unless_asked() -> None:
    run = _step_until_done(Engine([(5, 0, [("a", "x")])]), ["a"], OfflineSteps(0.0))
    assert run.texts is None

"""vLLM's speculation as counted in llem's process (no vLLM needed: its step stats and request
metrics are planted), handed to the run as facts and written by it with its ratios."""

from __future__ import annotations

from types import SimpleNamespace

from llem.backends.vllm.speculation import NO_REQUEST_METRICS, VLLMSpeculation
from llem.config.speculative import SpeculativeConfig, SpeculativeMethod
from llem.result import RunResult
from llem.runner.engine_facts import write_window_facts
from llem.vocabulary.facts import WindowFacts

NGRAM = SpeculativeConfig(method=SpeculativeMethod.ngram, num_tokens=3)


def _step(drafts: int, proposed: int, accepted: int, per: list[int]) -> SimpleNamespace:
    stats = SimpleNamespace(
        num_drafts=drafts,
        num_draft_tokens=proposed,
        num_accepted_tokens=accepted,
        num_accepted_tokens_per_pos=per,
    )
    return SimpleNamespace(spec_decoding_stats=stats)


def _written(counted: VLLMSpeculation) -> RunResult:
    result = RunResult(status="ok")
    result.null_reasons["speculative"] = "planted: not counted yet"
    write_window_facts(result, WindowFacts(speculative=counted.facts()))
    return result


def test_the_counts_and_their_ratios_are_written_by_the_run() -> None:
    counted = VLLMSpeculation(NGRAM, do_sample=False)
    counted.step(_step(2, 6, 3, [2, 1]))
    counted.step(SimpleNamespace())  # a step that verified nothing
    counted.step(_step(1, 3, 1, [1]))
    # per request: proposed tokens, and a histogram of accepted counts per verification
    counted.request(SimpleNamespace(num_draft_tokens=6, histogram=[0, 1, 1]), [1, 3, 2])
    counted.request(SimpleNamespace(num_draft_tokens=3, histogram=[0, 0]), [1, 1])
    result = _written(counted)
    s = result.speculative
    assert s is not None and "speculative" not in result.null_reasons
    assert (s.draft_tokens_proposed, s.draft_tokens_accepted, s.steps_with_proposals) == (9, 4, 3)
    assert (s.target_steps, s.tokens_generated, s.target_steps_saved) == (5, 8, 3)
    assert s.request_draft_tokens_proposed == [6, 3]
    assert s.request_draft_tokens_accepted == [3, 0]
    assert s.draft_tokens_accepted_per_position == [3, 1]
    assert s.acceptance_rate == 4 / 9
    assert s.tokens_per_target_step == 8 / 5


def test_requests_without_vllms_metrics_leave_the_per_request_lists_null() -> None:
    counted = VLLMSpeculation(NGRAM, do_sample=False)
    counted.step(_step(1, 3, 2, [1, 1]))
    counted.request(None, [3])
    result = _written(counted)
    assert result.speculative is not None
    assert result.speculative.request_draft_tokens_proposed == []
    assert result.null_reasons["speculative.request_draft_tokens_accepted"] == NO_REQUEST_METRICS

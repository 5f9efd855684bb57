"""The draft's energy where the engine records no spans (vLLM, a server): every new figure of
the ``speculative`` section null with that reason, the section's other fields as they were."""

from __future__ import annotations

from types import SimpleNamespace

from llem.result import RunResult, SpeculativeSection
from llem.runner.draft_energy import DRAFT_FIGURES, NO_SPANS, fill_draft_energy


def test_an_engine_that_records_no_spans_leaves_the_figures_null_with_the_reason() -> None:
    result = RunResult(status="ok")
    before = SpeculativeSection("ngram", "vLLM", "greedy", 3, draft_tokens_accepted=7)
    result.speculative = before
    fill_draft_energy(result, None, SimpleNamespace(last_window=object()))  # type: ignore[arg-type]
    s = result.speculative
    assert s == before  # nothing else changes
    for name in (*DRAFT_FIGURES, "draft_s", "verification_s", "draft_energy_method"):
        assert getattr(s, name) is None
        assert result.null_reasons[f"speculative.{name}"] == NO_SPANS


def test_a_run_without_speculation_gets_nothing() -> None:
    result = RunResult(status="ok")
    fill_draft_energy(result, None, SimpleNamespace(last_window=object()))  # type: ignore[arg-type]
    assert result.speculative is None
    assert not any(k.startswith("speculative.") for k in result.null_reasons)

"""When each draft ran, as the PyTorch engine records it, through a real run of a tiny random
model (prompt lookup, and assisted generation with the target as its own draft): the spans lie
inside the measured window, do not overlap, and there is one draft and one verification per
verification step counted; on this machine (no energy source) the draft's energy is null with
the energy's reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import llem.runner.runner as runner_module
from llem.runner import Runner
from llem.testing.cli import compose_tiny

pytestmark = pytest.mark.slow  # each run loads the tiny model and generates: a few s


def _run(model: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Any:
    seen: dict[str, Any] = {}
    fill = runner_module.fill_draft_energy

    def spy(result: Any, spans: Any, session: Any) -> None:
        seen["spans"], seen["window"] = spans, session.last_window
        fill(result, spans, session)

    monkeypatch.setattr(runner_module, "fill_draft_energy", spy)
    cfg = compose_tiny(
        model,
        "measurement.warmup=1",
        "measurement.min_window_s=0",
        "decoder.max_new_tokens=24",
        "dataset.n_prompts=3",
        *extra,
    )
    result = Runner().run(cfg, run_dir)
    return result, seen["spans"], seen["window"]


@pytest.mark.parametrize(
    "method",
    [("speculative=ngram", "speculative.num_tokens=3"), ("speculative=draft", "DRAFT")],
    ids=["ngram", "draft"],
)
def test_the_spans_lie_in_the_window_apart_one_per_verification_step(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: tuple[str, str]
) -> None:
    extra = [f"speculative.draft_model={tiny_model_dir}" if m == "DRAFT" else m for m in method]
    result, spans, window = _run(tiny_model_dir, tmp_path / "run", monkeypatch, *extra)
    s = result.speculative
    assert s is not None and s.target_steps > 0
    assert len(spans.draft) == len(spans.verification) == s.target_steps
    marks = [t for d, v in zip(spans.draft, spans.verification, strict=True) for t in (*d, *v)]
    assert all(a <= b for a, b in zip(marks, marks[1:], strict=False))  # in order, apart
    for (a, b), (c, d) in zip(spans.draft, spans.verification, strict=True):
        assert a < b == c < d  # a verification runs from its draft's end
    assert window.start_s <= marks[0] and marks[-1] <= window.end_s
    assert s.draft_s == pytest.approx(sum(b - a for a, b in spans.draft), abs=1e-5)
    assert s.verification_s == pytest.approx(sum(b - a for a, b in spans.verification), abs=1e-5)
    for name in ("draft_energy_j", "verification_energy_j", "draft_energy_fraction"):
        assert getattr(s, name) is None
        assert result.null_reasons[f"speculative.{name}"].startswith("energy unavailable")

"""What speculation did on the PyTorch engine, counted against truths the tests plant: the
target's forward passes (a forward hook on the target), the draft's forward passes (a hook on the
draft: one per proposed token), and the tokens generate() returned. Greedy outputs with
speculation equal the plain run's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llem.backends import create_backend
from llem.config.schema import ExperimentConfig, SpeculativeMethod
from llem.result import RunResult
from llem.runner.engine_facts import write_window_facts
from llem.testing.tinymodel import build_tiny_model
from llem.vocabulary.workload import Prompt

pytestmark = pytest.mark.slow  # each test loads the tiny model (and a draft) and generates: ~10 s

# repetitive text, so that prompt lookup finds n-grams to continue
PROMPTS = [
    Prompt(text="one two three four one two three four one two three"),
    Prompt(text="the cat sat on the mat and the cat sat on the"),
    Prompt(text="a b c d e f a b c d e f a b c"),
]


@pytest.fixture(scope="module")
def other_draft(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random model of other weights (seed 1) with the same tokenizer."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-draft"), seed=1)


def _no_gpus() -> Any:
    raise AssertionError("an engine in llem's process asks for no GPU library after the window")


def _exp(model: Path, method: str = "none", draft: Path | None = None, n: int = 4) -> Any:
    exp = ExperimentConfig()
    exp.model.name_or_path = str(model)
    exp.backend = "pytorch"
    exp.decoder.max_new_tokens = 24
    exp.measurement.save_outputs = True
    exp.speculative.method = SpeculativeMethod(method)
    exp.speculative.num_tokens = n
    exp.speculative.draft_model = None if draft is None else str(draft)
    return exp


class _Window:
    """One run's window on the CPU: its batches, the section, and the planted truths."""

    def __init__(self, exp: ExperimentConfig) -> None:
        backend = create_backend(exp)
        loaded = backend.load("cpu")
        batches = backend.batches(PROMPTS)
        backend.warm_up(loaded, batches, 1)  # a warm-up request: never in the counts
        target_calls: list[int] = []
        draft_calls: list[int] = []
        hooks = [loaded.model.register_forward_hook(lambda *_: target_calls.append(1))]
        draft = getattr(loaded, "draft", None)
        if draft is not None:
            hooks.append(draft.register_forward_hook(lambda *_: draft_calls.append(1)))
        self.outputs = []
        self.target_steps: list[int] = []
        self.draft_passes: list[int] = []
        for batch in batches:
            before_t, before_d = len(target_calls), len(draft_calls)
            self.outputs.append(backend.generate(loaded, batch))
            self.target_steps.append(len(target_calls) - before_t)
            self.draft_passes.append(len(draft_calls) - before_d)
        for h in hooks:
            h.remove()
        self.result = RunResult(status="ok")
        self.result.null_reasons["speculative"] = "planted: the engine did not write it"
        write_window_facts(self.result, loaded.window_facts(Path("."), _no_gpus, []))
        backend.unload(loaded)

    @property
    def texts(self) -> list[str]:
        return [t for b in self.outputs for t in (b.texts or [])]

    @property
    def output_tokens(self) -> list[int]:
        return [n for b in self.outputs for n in b.output_tokens]


@pytest.fixture(scope="module")
def plain(tiny_model_dir: Path) -> _Window:
    return _Window(_exp(tiny_model_dir))


def _check_counts(w: _Window) -> Any:
    """The section against the truths: one target step per target forward pass; a step adds its
    accepted proposals and one token of the target's own, so accepted = tokens - target passes."""
    s = w.result.speculative
    assert s is not None and s.requests == len(PROMPTS)
    assert s.request_target_steps == w.target_steps
    accepted = [n - t for n, t in zip(w.output_tokens, w.target_steps, strict=True)]
    assert s.request_draft_tokens_accepted == accepted
    assert s.draft_tokens_accepted == sum(accepted)
    # a step keeps its proposals in order: position i only where position i - 1 was kept
    per = s.draft_tokens_accepted_per_position
    assert sum(per) == sum(accepted) and len(per) <= s.num_tokens
    assert all(a >= b for a, b in zip(per, per[1:], strict=False))
    assert s.target_steps == sum(w.target_steps)
    assert s.tokens_generated == sum(w.output_tokens)
    assert s.target_steps_saved == sum(w.output_tokens) - sum(w.target_steps)
    assert s.mean_accepted_tokens_per_step == pytest.approx(sum(accepted) / sum(w.target_steps))
    assert s.tokens_per_target_step == pytest.approx(sum(w.output_tokens) / sum(w.target_steps))
    assert "speculative" not in w.result.null_reasons
    return s


def test_plain_decoding_takes_one_target_pass_per_token_and_writes_no_section(plain):
    assert plain.target_steps == plain.output_tokens  # the truth the speculative runs beat
    assert plain.result.speculative is None
    assert plain.result.null_reasons["speculative"] == "planted: the engine did not write it"


def test_the_target_as_its_own_draft_has_every_proposal_accepted(tiny_model_dir, plain):
    w = _Window(_exp(tiny_model_dir, "draft", draft=tiny_model_dir, n=4))
    s = _check_counts(w)
    # the draft's forward passes propose one token each: the planted count of proposals
    assert s.request_draft_tokens_proposed == w.draft_passes
    assert s.draft_tokens_proposed == sum(w.draft_passes)
    # Every proposal is the target's own greedy token, so each is kept; the one exception is
    # transformers' count at an EOS: a proposed EOS the target agrees with ends the request and
    # is counted as the target's own token of that step (n_matches is recounted after the crop
    # at EOS), so a request that ends on a proposed EOS has one proposal fewer accepted.
    reasons = [r for b in w.outputs for r in (b.finish_reasons or [])]
    assert "stop" in reasons and "length" in reasons  # both cases occur in this window
    for why, p, a in zip(
        reasons, s.request_draft_tokens_proposed, s.request_draft_tokens_accepted, strict=True
    ):
        assert a == (p if why == "length" else p - 1), (why, p, a)
    assert s.acceptance_rate is not None and s.acceptance_rate > 0.95
    assert s.mechanism.startswith("transformers assisted generation")
    assert s.verification.startswith("greedy")
    assert w.texts == plain.texts  # greedy speculation changes nothing in the output


def test_a_draft_of_other_random_weights_is_almost_never_accepted(
    tiny_model_dir, other_draft, plain
):
    w = _Window(_exp(tiny_model_dir, "draft", draft=other_draft, n=4))
    s = _check_counts(w)
    assert s.request_draft_tokens_proposed == w.draft_passes
    assert s.acceptance_rate is not None and s.acceptance_rate < 0.1
    assert w.texts == plain.texts


def test_prompt_lookup_counts_match_the_target_passes_and_keep_the_output(tiny_model_dir, plain):
    w = _Window(_exp(tiny_model_dir, "ngram", n=3))
    s = _check_counts(w)
    assert s.method == "ngram" and s.num_tokens == 3
    assert s.draft_tokens_proposed >= s.draft_tokens_accepted > 0
    assert s.steps_with_proposals <= s.target_steps
    assert s.draft_tokens_proposed <= 3 * s.steps_with_proposals
    assert w.texts == plain.texts


def test_a_draft_with_another_tokenizer_is_refused(tiny_model_dir, tmp_path):
    from llem.errors import RunError
    from llem.testing.tinymodel import tiny_tokenizer

    other = build_tiny_model(tmp_path / "other", seed=2)
    tok = tiny_tokenizer()
    tok.add_tokens(["<planted-extra-token>"])
    tok.save_pretrained(other)
    exp = _exp(tiny_model_dir, "draft", draft=other)
    with pytest.raises(RunError, match="does not share the target's tokenizer"):
        create_backend(exp).load("cpu")

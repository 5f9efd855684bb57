"""Stop strings (``Prompt.stop``) on the PyTorch engine, static batches and continuous batching:
the engine stops each request at the token that completes one, and its output tokens end there.

The truth is planted: the tiny random model's greedy continuation is generated first without a
stop string, and a stop string is made of the text of one of its tokens (one that the text
before it does not hold), so the request must end with exactly that token.
"""

from __future__ import annotations

import dataclasses

import pytest

from backends.stop_planting import greedy, planted_stop
from llem.backends import create_backend, sections
from llem.backends.pytorch import PyTorchBackend
from llem.backends.stops import batch_stops, cut_chunks, prompt_stops, stop_index
from llem.config.pytorch import Batching
from llem.config.schema import ExperimentConfig
from llem.vocabulary.workload import Prompt, ScheduledRequest

MAX_NEW = 16
TEXTS = ["Question: What is 1 + 1?\nAnswer:", "The quick brown fox jumps over the lazy dog."]


def _exp(path: str, **pytorch: object) -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.model.name_or_path = path
    exp.backend = "pytorch"
    exp.decoder.max_new_tokens = MAX_NEW
    exp.measurement.save_outputs = True
    for key, value in pytorch.items():
        setattr(exp.pytorch, key, value)
    return exp


@pytest.fixture(scope="module")
def static(tiny_model_dir):
    exp = _exp(str(tiny_model_dir))
    backend = create_backend(exp)
    assert isinstance(backend, PyTorchBackend)
    loaded = backend.load("cpu")
    loaded.model.generation_config.eos_token_id = None  # nothing but the stop ends a row
    yield backend, loaded
    backend.unload(loaded)


def test_a_static_batch_stops_each_row_at_its_stop_string(static) -> None:
    backend, loaded = static
    tok = loaded.tokenizer
    reference = greedy(loaded, MAX_NEW, TEXTS[0])
    # the second row's continuation does not hold it: that row runs to the limit
    stop, expected = planted_stop(tok, reference, tok.decode(greedy(loaded, MAX_NEW, TEXTS[1])))
    prompts = [Prompt(text=t, stop=(stop,)) for t in TEXTS]

    out = backend.generate(loaded, prompts)

    assert out.output_tokens == [expected, MAX_NEW] and expected < MAX_NEW
    assert out.finish_reasons == ["stop", "length"]
    assert out.texts is not None and out.texts[0] == tok.decode(
        reference[:expected], skip_special_tokens=True
    )
    assert out.texts[0].endswith(stop)  # the stop string's own tokens are generated and counted


def test_a_batch_whose_rows_all_stop_ends_there(static) -> None:
    """Both rows stop early: the batch stops stepping at the later stop, not at the limit."""
    backend, loaded = static
    tok = loaded.tokenizer
    stop, expected = planted_stop(tok, greedy(loaded, MAX_NEW, TEXTS[0]))
    out = backend.generate(loaded, [Prompt(text=TEXTS[0], stop=(stop,))])
    assert out.output_tokens == [expected]
    assert len(out.step_times_s) == expected < MAX_NEW


def test_padding_after_a_stop_is_not_counted_when_the_pad_is_the_eos(static) -> None:
    """A row that stopped is padded with the pad token; where it is also the EOS, counting up
    to the first EOS would count one pad."""
    backend, loaded = static
    tok = loaded.tokenizer
    avoid = tok.decode(greedy(loaded, MAX_NEW, TEXTS[1]))
    stop, expected = planted_stop(tok, greedy(loaded, MAX_NEW, TEXTS[0]), avoid)
    config = loaded.model.generation_config
    config.eos_token_id = tok.pad_token_id
    try:
        out = backend.generate(loaded, [Prompt(text=t, stop=(stop,)) for t in TEXTS])
    finally:
        config.eos_token_id = None
    assert out.output_tokens[0] == expected


def test_without_stop_strings_a_row_runs_to_the_limit(static) -> None:
    backend, loaded = static
    out = backend.generate(loaded, [Prompt(text=TEXTS[0])])
    assert out.output_tokens == [MAX_NEW] and out.finish_reasons == ["length"]


def test_beam_search_stops_at_the_stop_string_too(tiny_model_dir) -> None:
    exp = _exp(str(tiny_model_dir), num_beams=2)
    backend = create_backend(exp)
    loaded = backend.load("cpu")
    loaded.model.generation_config.eos_token_id = None
    try:
        tok = loaded.tokenizer
        free = backend.generate(loaded, [Prompt(text=TEXTS[0])])
        assert free.output_tokens == [MAX_NEW] and free.texts is not None
        ids = tok(free.texts[0], add_special_tokens=False)["input_ids"]
        stop, _ = planted_stop(tok, ids)
        out = backend.generate(loaded, [Prompt(text=TEXTS[0], stop=(stop,))])
    finally:
        backend.unload(loaded)
    assert out.texts is not None and out.texts[0].endswith(stop)
    assert out.output_tokens[0] < MAX_NEW and out.finish_reasons == ["stop"]


def test_continuous_batching_cancels_a_request_at_its_stop_string(tiny_model_dir) -> None:
    exp = _exp(str(tiny_model_dir), batching=Batching.continuous, batch_size=2)
    backend = PyTorchBackend(dataclasses.replace(sections(exp, "pytorch"), serving=True))
    loaded = backend.load("cpu")
    try:
        loaded.model.generation_config.eos_token_id = None
        tok = loaded.tokenizer
        reference = greedy(loaded, MAX_NEW, TEXTS[0])
        stop, expected = planted_stop(tok, reference, tok.decode(greedy(loaded, MAX_NEW, TEXTS[1])))
        prompts = [Prompt(text=t, stop=(stop,)) for t in TEXTS]
        backend.warm_up(loaded, [prompts], 0)
        requests = [ScheduledRequest(i, i, p, 0.0) for i, p in enumerate(prompts)]
        out = backend.serve(loaded, requests, None)
        # the cancelled request's handler is gone: a late output finds no closed event loop
        assert loaded.engine.manager.output_router.result_handlers == {}
    finally:
        backend.unload(loaded)
    first, second = sorted(out.requests, key=lambda t: t.request_id)
    assert (first.output_tokens, first.finish_reason) == (expected, "stop")
    assert len(first.chunk_times_s) == len(first.chunk_tokens)
    assert first.text == tok.decode(reference[:expected], skip_special_tokens=True)
    assert (second.output_tokens, second.finish_reason) == (MAX_NEW, "length")


# ------------------------------------------------------------------ the helpers, on planted text


class _CharTokenizer:
    """Each token id is one character (its code point)."""

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)


def test_stop_index_is_the_token_that_completes_the_first_stop() -> None:
    ids = [ord(c) for c in "abc\n\nQuestion: x"]
    tok = _CharTokenizer()
    assert stop_index(tok, ids, ["\n\n", "Question:"]) == 5
    assert stop_index(tok, ids, ["Question:"]) == 14
    assert stop_index(tok, ids, ["zzz"]) is None
    assert stop_index(tok, ids, []) is None


def test_chunks_are_cut_after_the_stop_token() -> None:
    assert cut_chunks([1.0, 2.0, 3.0], [2, 3, 1], 4) == ([1.0, 2.0], [2, 2])
    assert cut_chunks([1.0, 2.0], [1, 1], 2) == ([1.0, 2.0], [1, 1])


def test_one_batch_has_one_set_of_stop_strings() -> None:
    assert batch_stops([Prompt(text="a", stop=("x",)), Prompt(text="b", stop=("x",))]) == ("x",)
    assert batch_stops([Prompt(text="a")]) == ()
    with pytest.raises(ValueError, match="different stop strings"):
        batch_stops([Prompt(text="a", stop=("x",)), Prompt(text="b")])
    assert prompt_stops([Prompt(text="a", stop=("\n", "</s>"))] * 2) == ["\n", "</s>"]
    assert prompt_stops([Prompt(text="a")]) is None

"""The ``speculative`` group: its options compose, what does not fit a method or the PyTorch
engine is one line naming the key, and an engine that cannot run a method refuses it in
pre-flight."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize_config_module

from llem.config.engines import active_engine, engine, speculative_refusal
from llem.config.schema import ExperimentConfig, SpeculativeMethod
from llem.config.store import register_configs
from llem.config.validate import cross_field_problems, to_experiment
from llem.runner.preflight import engine_preflight


def _exp(*overrides: str) -> ExperimentConfig:
    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        return to_experiment(compose("config", overrides=list(overrides)))


def _problems(*overrides: str) -> list[str]:
    register_configs()
    with initialize_config_module(config_module="llem.conf", version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    from omegaconf import OmegaConf

    exp: ExperimentConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    return cross_field_problems(exp)


def test_the_default_is_none_and_each_option_sets_its_method():
    assert _exp().speculative.method == SpeculativeMethod.none
    ngram = _exp("speculative=ngram", "speculative.num_tokens=3", "speculative.ngram_size=4")
    assert (ngram.speculative.method, ngram.speculative.num_tokens) == (SpeculativeMethod.ngram, 3)
    assert ngram.speculative.ngram_size == 4
    draft = _exp("speculative=draft", "speculative.draft_model=some/draft")
    assert draft.speculative.method == SpeculativeMethod.draft
    assert draft.speculative.draft_model == "some/draft"


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["pytorch.prompt_lookup_num_tokens=3"],
            "pytorch.prompt_lookup_num_tokens=3 has moved to the speculative group: use "
            "speculative=ngram speculative.num_tokens=3",
        ),
        (
            ["speculative=draft"],
            "speculative=draft needs speculative.draft_model (a Hub name or local path of a model "
            "that shares the target's tokenizer)",
        ),
        (
            ["speculative=draft", "speculative.draft_model=d", "speculative.ngram_size=2"],
            "speculative.ngram_size=2 needs speculative=ngram (it is draft)",
        ),
        (
            ["speculative=ngram", "speculative.draft_model=d"],
            "speculative.draft_model=d needs speculative=draft (it is ngram)",
        ),
        (
            ["speculative=ngram", "pytorch.batch_size=4"],
            "speculative=ngram needs pytorch.batch_size=1 (it is 4): transformers verifies "
            "proposals for one prompt at a time",
        ),
        (
            ["speculative=ngram", "pytorch.num_beams=2"],
            "speculative=ngram needs pytorch.num_beams unset or 1 (it is 2)",
        ),
        (
            ["speculative=ngram", "speculative.ngram_size=0"],
            "speculative.ngram_size=0",
        ),
    ],
)
def test_what_does_not_fit_is_one_line_naming_the_key(overrides, line):
    problems = _problems(*overrides)
    assert len(problems) == 1, problems
    assert problems[0].startswith(line), problems


@pytest.mark.parametrize("method", ["ngram", "draft"])
def test_an_engine_without_the_method_refuses_it_in_preflight(method):
    draft = ["speculative.draft_model=d"] if method == "draft" else []
    exp = _exp("+backend=vllm", f"speculative={method}", *draft)
    row = dataclasses.replace(engine("vllm"), speculative=("none",))  # a row without it
    line = f"speculative={method}: backend=vllm cannot run it in llem (it can: speculative=none)"
    assert speculative_refusal(exp, row) == line
    assert line in engine_preflight(exp, row, "cpu", False)
    assert speculative_refusal(_exp("+backend=vllm"), row) is None


@pytest.mark.parametrize("backend", ["vllm", "server"])
def test_vllm_in_process_and_a_server_run_every_method(backend):
    for method in ("none", "ngram", "draft"):
        draft = ["speculative.draft_model=d"] if method == "draft" else []
        more = ["server.launch=vllm"] if backend == "server" else []
        exp = _exp(f"+backend={backend}", f"speculative={method}", *draft, *more)
        assert speculative_refusal(exp, engine(backend)) is None


@pytest.mark.parametrize(
    ("more", "why"),
    [
        (["server.launch=llamacpp"], "server.launch=llamacpp has no speculative mapping in llem"),
        (["server.launch=tgi"], "server.launch=tgi has no speculative mapping in llem"),
        (
            ["server.url=http://127.0.0.1:9"],
            "server.url names a running server, whose speculation llem cannot set",
        ),
    ],
)
def test_a_server_llem_cannot_set_speculating_refuses_it_in_preflight(more, why):
    exp = _exp("+backend=server", "speculative=ngram", *more)
    problems = engine_preflight(exp, active_engine(exp), "cpu", False)
    line = f"speculative=ngram: {why} (it can: server.launch=vllm or sglang, or speculative=none)"
    assert line in problems, problems


def test_engine_kwargs_and_the_group_both_setting_speculation_is_refused():
    exp = _exp("+backend=vllm", "speculative=ngram", "+vllm.engine_kwargs.speculative_config={}")
    problems = engine_preflight(exp, active_engine(exp), "cpu", False)
    line = "speculative=ngram and vllm.engine_kwargs.speculative_config both set the engine's"
    assert any(p.startswith(line) for p in problems), problems


def test_server_args_and_the_group_both_setting_speculation_is_refused():
    exp = _exp(
        "+backend=server",
        "server.launch=vllm",
        "speculative=ngram",
        "+server.args.speculative_config={method:ngram}",
    )
    problems = engine_preflight(exp, active_engine(exp), "cpu", False)
    assert any(
        p.startswith("speculative=ngram and server.args.speculative_config both set")
        for p in problems
    ), problems


def test_the_pytorch_engine_runs_every_method():
    for method in ("none", "ngram", "draft"):
        draft = ["speculative.draft_model=d"] if method == "draft" else []
        exp = _exp(f"speculative={method}", *draft)
        assert speculative_refusal(exp, engine("pytorch")) is None


@pytest.mark.parametrize(
    "backend", [["+backend=pytorch"], ["+backend=vllm"], ["+backend=server", "server.launch=vllm"]]
)
def test_a_draft_of_another_vocabulary_is_refused_in_preflight(backend, tiny_model_dir, tmp_path):
    from llem.backends.random_weights import byte_level_bpe
    from llem.testing.tinymodel import tiny_tokenizer

    # as many tokens as the target's tokenizer, learned from other text: other merges
    size = len(tiny_tokenizer().get_vocab())
    corpus = [" ".join(a + b + c for a in "qwxzjk" for b in "aeiou" for c in "vbnm")] * 8
    other = byte_level_bpe(corpus, size)
    assert len(other.get_vocab()) == size
    draft = tmp_path / "draft"
    other.save_pretrained(draft)
    target = ("model=hf", f"model.name_or_path={tiny_model_dir}")
    exp = _exp(*backend, *target, "speculative=draft", f"speculative.draft_model={draft}")
    problems = engine_preflight(exp, active_engine(exp), "cpu", False)
    line = (
        f"speculative.draft_model={draft} does not share the tokenizer of "
        f"model.name_or_path={tiny_model_dir}: their vocabularies differ"
    )
    assert [p for p in problems if p.startswith(line)], problems
    exp.speculative.draft_model = str(tiny_model_dir)  # the target's own: no such line
    assert not [p for p in engine_preflight(exp, active_engine(exp), "cpu", False) if "vocab" in p]

"""The ``speculative`` group: its options compose, what does not fit a method or the PyTorch
engine is one line naming the key, and an engine that cannot run a method refuses it in
pre-flight."""

from __future__ import annotations

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


@pytest.mark.parametrize("backend", ["vllm", "server"])
@pytest.mark.parametrize("method", ["ngram", "draft"])
def test_an_engine_without_the_method_refuses_it_in_preflight(backend, method):
    more = ["server.launch=llamacpp"] if backend == "server" else []
    draft = ["speculative.draft_model=d"] if method == "draft" else []
    exp = _exp(f"+backend={backend}", f"speculative={method}", *more, *draft)
    line = (
        f"speculative={method}: backend={backend} cannot run it in llem (it can: speculative=none)"
    )
    assert speculative_refusal(exp, active_engine(exp)) == line
    assert line in engine_preflight(exp, active_engine(exp), "cpu", False)
    assert speculative_refusal(_exp(f"+backend={backend}", *more), engine(backend)) is None


def test_the_pytorch_engine_runs_every_method():
    for method in ("none", "ngram", "draft"):
        draft = ["speculative.draft_model=d"] if method == "draft" else []
        exp = _exp(f"speculative={method}", *draft)
        assert speculative_refusal(exp, engine("pytorch")) is None

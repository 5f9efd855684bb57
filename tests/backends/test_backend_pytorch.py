"""The PyTorch backend: load kwargs reach from_pretrained, generate kwargs reach generate(),
left padding, and exact output-token counts."""

from __future__ import annotations

import pytest
import torch

from llem.backends import create_backend
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
from llem.vocabulary.workload import Prompt


def _exp(path: str = "unused") -> ExperimentConfig:
    exp = ExperimentConfig()
    exp.model.name_or_path = path
    exp.backend = "pytorch"
    return exp


def _backend(exp: ExperimentConfig) -> PyTorchBackend:
    """The backend built with ``exp``'s sections, as a run builds it."""
    backend = create_backend(exp)
    assert isinstance(backend, PyTorchBackend)
    return backend


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
    loaded = _backend(exp).load("cpu")
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
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 3
    exp.decoder.temperature = 0.5  # greedy: must not be passed
    backend = _backend(exp)
    loaded = backend.load("cpu")
    seen = {}
    real = loaded.model.generate

    def spy(**kwargs):
        seen.update(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(loaded.model, "generate", spy)
    backend.generate(loaded, [Prompt(text="hello world", token_ids=None)])
    assert "temperature" not in seen and seen["max_new_tokens"] == 3
    assert seen["do_sample"] is False


@pytest.mark.slow
def test_batch_with_unequal_prompts_and_early_eos_counts_exactly(tiny_model_dir):
    """Left padding keeps each row's continuation intact; an EOS mid-batch ends that row's count."""
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 6
    backend = _backend(exp)
    loaded = backend.load("cpu")
    model, tok = loaded.model, loaded.tokenizer
    prompts = [
        Prompt(text="The quick brown fox jumps over the lazy dog.", token_ids=None),
        Prompt(text="hi", token_ids=None),
    ]

    # Each row alone (no padding) gives the reference continuation.
    model.generation_config.eos_token_id = None
    singles = [backend.generate(loaded, [p]) for p in prompts]
    assert all(s.output_tokens == [6] for s in singles)
    batch = backend.generate(loaded, prompts)
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
    batch = backend.generate(loaded, prompts)
    assert batch.output_tokens == [expected0, expected1]
    assert expected1 <= 3


def test_beam_search_timestamps_every_step(tiny_model_dir):
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 4
    exp.pytorch.num_beams = 2
    backend = _backend(exp)
    loaded = backend.load("cpu")
    loaded.model.generation_config.eos_token_id = None
    out = backend.generate(loaded, [Prompt(text="hello", token_ids=None)] * 2)
    assert out.output_tokens == [4, 4] and len(out.step_times_s) == 4


@pytest.mark.parametrize("n", [1, 3])
def test_synthetic_token_ids_are_used_as_is(tiny_model_dir, n):
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 2
    backend = _backend(exp)
    loaded = backend.load("cpu")
    out = backend.generate(loaded, [Prompt(text=None, token_ids=(10, 11, 12))] * n)
    assert out.input_tokens == [3] * n


def _broken_backend(gm, example_inputs):
    raise RuntimeError("inductor backend exploded")


@pytest.fixture
def compile_with_broken_backend(monkeypatch):
    """torch.compile as usual, but with a compiler backend that fails: Dynamo really traces the
    model and raises its own BackendCompilerFailed at the first forward."""
    real = torch.compile

    def compile_(fn, **kwargs):
        return real(fn, backend=_broken_backend)

    monkeypatch.setattr(torch, "compile", compile_)


def _compile_exp(tiny_model_dir, warmup: int = 1) -> ExperimentConfig:
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 2
    exp.pytorch.torch_compile = True
    exp.measurement.warmup = warmup
    return exp


HELLO = [[Prompt(text="hello", token_ids=None)]]


@pytest.mark.slow
def test_compile_failure_in_warm_up_falls_back_and_the_label_says_so(
    tiny_model_dir, compile_with_broken_backend
):
    exp = _compile_exp(tiny_model_dir)
    backend = _backend(exp)
    loaded = backend.load("cpu")
    assert loaded.torch_compile == "pending"  # nothing has compiled yet
    backend.warm_up(loaded, HELLO, exp.measurement.warmup)
    assert loaded.torch_compile.startswith("failed: BackendCompilerFailed")
    out = backend.generate(loaded, HELLO[0])  # eager now
    assert out.output_tokens[0] >= 1


@pytest.mark.slow
def test_warm_up_zero_still_compiles_before_the_window(tiny_model_dir, monkeypatch):
    exp = _compile_exp(tiny_model_dir, warmup=0)
    exp.pytorch.torch_compile_backend = "eager"  # Dynamo traces; no code generation
    backend = _backend(exp)
    loaded = backend.load("cpu")
    calls = []
    real = backend.generate
    monkeypatch.setattr(backend, "generate", lambda *a: calls.append(1) or real(*a))
    backend.warm_up(loaded, HELLO, exp.measurement.warmup)
    assert loaded.torch_compile == "active" and len(calls) == 1


def test_an_error_that_is_not_a_compile_error_is_not_swallowed(tiny_model_dir, monkeypatch):
    def compile_(fn, **kwargs):
        def compiled(*a, **k):
            raise ValueError("a bug in the model code")

        return compiled

    monkeypatch.setattr(torch, "compile", compile_)
    exp = _compile_exp(tiny_model_dir)
    backend = _backend(exp)
    loaded = backend.load("cpu")
    with pytest.raises(ValueError, match="a bug in the model code"):
        backend.warm_up(loaded, HELLO, exp.measurement.warmup)


@pytest.mark.slow
def test_a_compile_error_inside_the_window_fails_instead_of_mixing_eager_in(
    tiny_model_dir, monkeypatch
):
    from llem.errors import RunError

    exp = _compile_exp(tiny_model_dir)
    exp.pytorch.torch_compile_backend = "eager"
    backend = _backend(exp)
    loaded = backend.load("cpu")
    backend.warm_up(loaded, HELLO, exp.measurement.warmup)
    assert loaded.torch_compile == "active"
    # A recompilation (e.g. a new batch shape) that fails once the window has begun.
    real = torch.compile
    loaded.model.forward = real(loaded.eager_forward, backend=_broken_backend)
    with pytest.raises(RunError, match="inside the measured window"):
        backend.generate(loaded, HELLO[0])


@pytest.mark.slow
def test_result_records_the_compile_fallback_that_actually_ran(
    tiny_model_dir, tmp_path, compile_with_broken_backend
):
    result = _run(tiny_model_dir, tmp_path, "pytorch.torch_compile=true", "measurement.warmup=0")
    assert result["status"] == "ok"
    assert result["lifecycle"]["torch_compile"].startswith("failed: BackendCompilerFailed")


def test_out_of_memory_becomes_a_clear_error_with_fixes(tiny_model_dir, monkeypatch):
    from llem.errors import OutOfMemory

    exp = _exp(str(tiny_model_dir))
    exp.pytorch.batch_size = 16
    backend = _backend(exp)
    loaded = backend.load("cpu")

    def oom(**kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(loaded.model, "generate", oom)
    with pytest.raises(OutOfMemory) as err:
        backend.generate(loaded, [Prompt(text="hi", token_ids=None)])
    assert "out of memory during generate" in err.value.message
    for fix in ("pytorch.batch_size (now 16)", "quantization=bnb-4bit", "pytorch.max_memory"):
        assert fix in err.value.hint


def _run(tiny_model_dir, tmp_path, *overrides: str) -> dict:
    """One real run in-process (real Hydra composition, the tiny model, no energy source)."""
    from llem.testing.cli import run_tiny

    base = ("decoder.max_new_tokens=4", "dataset.n_prompts=3", "pytorch.batch_size=2")
    return run_tiny(tiny_model_dir, tmp_path / "run", *base, *overrides)


@pytest.mark.slow
def test_generate_only_rate_is_its_own_named_figure(tiny_model_dir, tmp_path):
    result = _run(tiny_model_dir, tmp_path, "measurement.warmup=0")
    t, w = result["throughput"], result["workload"]
    expected = w["output_tokens"] / result["latency"]["generate_s"]
    assert t["generate_output_tokens_per_s"] == pytest.approx(expected, rel=1e-3)


def test_save_outputs_writes_what_was_measured(tiny_model_dir, tmp_path):
    import json

    result = _run(tiny_model_dir, tmp_path, "measurement.save_outputs=true")
    lines = (tmp_path / "run" / "generations.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["request"] for r in records] == [0, 1, 2]
    assert sum(r["output_tokens"] for r in records) == result["workload"]["output_tokens"]
    assert all(isinstance(r["text"], str) for r in records)
    assert not (tmp_path / "other").exists()


def test_no_generations_file_unless_asked(tiny_model_dir, tmp_path):
    _run(tiny_model_dir, tmp_path)
    assert not (tmp_path / "run" / "generations.jsonl").exists()


@pytest.mark.slow
def test_sampling_repeats_each_get_their_own_recorded_seed(tiny_model_dir, tmp_path):
    import json

    texts, seeds = [], []
    for repeat in (0, 1):
        out = tmp_path / f"r{repeat}"
        result = _run(
            tiny_model_dir,
            out,
            "decoder=creative",
            "decoder.max_new_tokens=8",
            f"repeat={repeat}",
            "seed=7",
            "measurement.save_outputs=true",
        )
        seeds.append(result["lifecycle"]["seed"])
        lines = (out / "run" / "generations.jsonl").read_text().splitlines()
        texts.append([json.loads(line)["text"] for line in lines])
    assert seeds == [7, 8]
    assert texts[0] != texts[1]


def test_greedy_repeats_keep_the_configured_seed(tiny_model_dir, tmp_path):
    result = _run(tiny_model_dir, tmp_path, "repeat=3", "seed=7")
    assert result["lifecycle"]["seed"] == 7


def test_beams_are_recorded_on_each_batch(tiny_model_dir):
    exp = _exp(str(tiny_model_dir))
    exp.decoder.max_new_tokens = 2
    exp.pytorch.num_beams = 3
    backend = _backend(exp)
    loaded = backend.load("cpu")
    assert backend.generate(loaded, HELLO[0]).num_beams == 3


def test_peak_memory_covers_every_gpu_the_model_is_on(monkeypatch):
    """Two GPUs with different peaks: the figure is their sum, and each is listed."""
    from llem.backends.memory import peak_memory, reset_peak_memory

    allocated = {0: 100 * 2**20, 1: 300 * 2**20}
    reset = []
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda i: allocated[i])
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda i: 2 * allocated[i])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda i: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset.append)
    reset_peak_memory([0, 1])
    mem = peak_memory([0, 1])
    assert reset == [0, 1]
    assert mem["peak_allocated_mb"] == 400.0 and mem["peak_reserved_mb"] == 800.0
    assert mem["per_device"]["cuda:1"] == {"peak_allocated_mb": 300.0, "peak_reserved_mb": 600.0}


def test_a_model_with_a_chat_template_gets_templated_prompts_by_default(tiny_model_dir, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    from llem.runner.prompt_files import builtin_texts

    model_dir = tmp_path / "chat-model"
    shutil.copytree(tiny_model_dir, model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.chat_template = "{% for m in messages %}<s>user: {{ m['content'] }}</s>{% endfor %}"
    tok.save_pretrained(model_dir)
    templated = sum(
        len(tok(f"<s>user: {t}</s>", add_special_tokens=False)["input_ids"])
        for t in builtin_texts()[:3]
    )
    result = _run(model_dir, tmp_path)
    assert result["workload"]["chat_template_applied"] is True
    assert result["workload"]["input_tokens"] == templated
    raw = _run(model_dir, tmp_path / "raw", "dataset.chat_template=false")
    assert raw["workload"]["chat_template_applied"] is False
    assert raw["workload"]["input_tokens"] != templated

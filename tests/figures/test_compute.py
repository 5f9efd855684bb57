"""FLOPs and decode bandwidth utilisation (llem.figures.compute; shapes: llem.backends.shape)."""

from __future__ import annotations

import pytest

from llem.backends.shape import is_moe, kv_layout, model_shape
from llem.config.schema import CacheImplementation
from llem.figures.compute import compute_figures, decode_bytes
from llem.testing.tinymodel import tiny_llama
from llem.vocabulary.model import KvLayout, ModelShape
from llem.vocabulary.workload import BatchOutput

LLAMA2_7B_PARAMS = 6_738_415_616


def _llama(tied: bool, **overrides):
    return tiny_llama(vocab_size=1000, tie_word_embeddings=tied, **overrides)


def _batch(inputs, outputs, steps, beams=1, step_s=0.01) -> BatchOutput:
    return BatchOutput(
        start_s=0.0,
        end_s=steps * step_s,
        input_tokens=list(inputs),
        output_tokens=list(outputs),
        step_times_s=[step_s * (j + 1) for j in range(steps)],
        step_tokens=[1] * steps,
        num_beams=beams,
    )


def _shape(**kw) -> ModelShape:
    base = dict(
        n_parameters=1000,
        n_input_embedding=100,
        n_lm_head=100,
        tied_lm_head=False,
        weight_bytes=1_000_000,
        kv=KvLayout(1000, (None, None)),
        moe=False,
        cuda_devices=(0,),
    )
    base.update(kw)
    return ModelShape(**base)  # type: ignore[arg-type]


# --- FLOPs ---------------------------------------------------------------------------------------


def test_a_tied_lm_head_still_counts_so_flops_are_two_x_parameters_x_tokens():
    model = _llama(tied=True)
    shape = model_shape(model)
    n_params = sum(p.numel() for p in model.parameters())  # the tied matrix counted once
    assert shape.tied_lm_head and shape.n_parameters == n_params
    assert shape.matmul_parameters == n_params
    figures = compute_figures(shape, [_batch([5, 7], [3, 4], 4)], "cpu", {})
    assert figures.flops_estimate == 2 * n_params * (5 + 7 + 3 + 4)


def test_an_untied_model_leaves_out_only_the_input_embedding_lookup():
    model = _llama(tied=False)
    shape = model_shape(model)
    emb = model.get_input_embeddings().weight.numel()
    assert not shape.tied_lm_head
    assert shape.matmul_parameters == sum(p.numel() for p in model.parameters()) - emb


def test_every_beam_counts():
    shape = _shape()
    one = compute_figures(shape, [_batch([5], [3], 3, beams=1)], "cpu", {})
    four = compute_figures(shape, [_batch([5], [3], 3, beams=4)], "cpu", {})
    assert four.flops_estimate == 4 * one.flops_estimate


@pytest.mark.slow
def test_four_bit_weights_count_as_the_weights_they_were():
    """bitsandbytes packs two 4-bit weights per byte; numel() of the packed tensor is half."""
    import bitsandbytes as bnb  # in the test extra: this test never skips

    model = _llama(tied=True)
    before = model_shape(model)
    proj = model.model.layers[0].mlp.gate_proj
    q = bnb.nn.Linear4bit(proj.in_features, proj.out_features, bias=False, quant_type="nf4")
    q.weight = bnb.nn.Params4bit(data=proj.weight.data.clone(), requires_grad=False)
    q = q.to("cpu")
    model.model.layers[0].mlp.gate_proj = q
    assert q.weight.numel() < proj.weight.numel()  # packed
    after = model_shape(model)
    assert after.n_parameters == before.n_parameters
    assert after.weight_bytes < before.weight_bytes  # fewer bytes are read per step


def test_mixture_of_experts_gives_null_flops_with_a_reason():
    from transformers import MixtralConfig

    assert is_moe(MixtralConfig()) and not is_moe(_llama(tied=True).config)
    figures = compute_figures(_shape(moe=True), [_batch([5], [3], 3)], "cuda", {0: 1e12})
    assert figures.flops_estimate is None
    assert "mixture-of-experts" in figures.null_reasons["compute.flops_estimate"]
    assert figures.decode_bandwidth_utilisation is None
    assert "routed experts" in figures.null_reasons["compute.decode_bandwidth_utilisation"]


# --- KV cache ------------------------------------------------------------------------------------


def test_llama2_7b_kv_reads_at_batch_32_and_1k_context_exceed_the_weights():
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
    )
    kv = kv_layout(config, element_bytes=2)  # fp16
    assert kv is not None
    assert kv.bytes_per_position_per_layer == 2 * 32 * 128 * 2  # K and V, 32 heads x 128
    assert kv.bytes_read(1024) == 512 * 1024 * 1024  # 0.5 MiB per position, all layers
    emb = 32000 * 4096
    weights = 2 * (LLAMA2_7B_PARAMS - emb)  # fp16 weights read per step (LM head included)
    shape = _shape(n_parameters=LLAMA2_7B_PARAMS, weight_bytes=weights, kv=kv)
    # 32 prompts of 1023 tokens: the first decode step attends over 1024 positions.
    w_bytes, kv_bytes = decode_bytes(shape, _batch([1023] * 32, [2] * 32, 2), None)
    assert w_bytes == weights and kv_bytes == 32 * 1024 * 512 * 1024
    assert kv_bytes > w_bytes  # 17.2 GB of KV cache against 13.2 GB of weights


def test_context_grows_by_one_position_per_step_over_the_padded_width():
    shape = _shape(weight_bytes=0, kv=KvLayout(1, (None,)))
    _, kv = decode_bytes(shape, _batch([3, 5], [4, 4], 4), None)
    # steps 1..3 attend over 5+1, 5+2, 5+3 positions, for both rows
    assert kv == 2 * (6 + 7 + 8)


def test_sliding_window_layers_read_at_most_their_window():
    kv = KvLayout(10, (4, None))
    assert kv.bytes_read(3) == 10 * (3 + 3)
    assert kv.bytes_read(100) == 10 * (4 + 100)
    from transformers import MistralConfig

    layout = kv_layout(MistralConfig(num_hidden_layers=2, sliding_window=16), 2)
    assert layout is not None and layout.layer_windows == (16, 16)


def test_a_static_cache_is_read_at_its_full_length():
    shape = _shape(weight_bytes=0, kv=KvLayout(1, (None,)))
    batch = _batch([5], [4], 4)
    figures = compute_figures(
        shape, [batch], "cuda", {0: 1.0}, cache=CacheImplementation.static, max_new_tokens=64
    )
    assert figures.decode_kv_bytes == 3 * (5 + 64)


def test_the_tiny_models_kv_layout():
    shape = model_shape(_llama(tied=True))
    assert shape.kv == KvLayout(2 * 2 * 8 * 4, (None, None))  # 2 KV heads x 8 dims, fp32


# --- bandwidth utilisation -----------------------------------------------------------------------


def test_utilisation_divides_by_one_gpus_bandwidth_when_layers_span_two():
    """device_map=auto: layers run one GPU at a time, so the bytes flow through one GPU's
    memory at a time; summing both GPUs' bandwidths would halve the figure."""
    shape = _shape(cuda_devices=(0, 1), weight_bytes=1_000_000, kv=KvLayout(1000, (None, None)))
    batch = _batch([10], [5], 5, step_s=0.001)
    figures = compute_figures(shape, [batch], "cuda", {0: 2e9, 1: 2e9})
    w, kv = decode_bytes(shape, batch, None)
    assert kv == 1000 * 2 * (11 + 12 + 13 + 14)
    expected = (w + kv) / 0.004 / 2e9
    assert figures.decode_bandwidth_utilisation == pytest.approx(expected)
    assert figures.as_dict()["decode_bandwidth_utilisation"] == round(expected, 4)


@pytest.mark.parametrize(
    "shape_kw, device, bandwidths, cache, reason",
    [
        ({}, "cpu", {}, None, "on the CPU"),
        ({"offloaded_to": ("cpu",)}, "cuda", {0: 1e12}, None, "offloaded to cpu"),
        ({}, "cuda", {0: 1e12}, CacheImplementation.offloaded_static, "KV cache is offloaded"),
        ({"kv": None}, "cuda", {0: 1e12}, None, "KV-cache layout"),
        ({"cuda_devices": (0, 1)}, "cuda", {0: 1e12, 1: None}, None, "unknown for cuda:1"),
        ({"cuda_devices": (0, 1)}, "cuda", {0: 1e12, 1: 2e12}, None, "different memory"),
    ],
)
def test_utilisation_is_null_with_a_reason_where_the_formula_does_not_hold(
    shape_kw, device, bandwidths, cache, reason
):
    batches = [_batch([5], [3], 3)]
    figures = compute_figures(_shape(**shape_kw), batches, device, bandwidths, cache=cache)
    assert figures.decode_bandwidth_utilisation is None
    assert reason in figures.null_reasons["compute.decode_bandwidth_utilisation"]
    assert figures.flops_estimate is not None


def test_no_decode_steps_gives_null_not_zero():
    figures = compute_figures(_shape(), [_batch([5], [1], 1)], "cuda", {0: 1e12})
    assert figures.decode_bandwidth_utilisation is None
    assert "no decode steps" in figures.null_reasons["compute.decode_bandwidth_utilisation"]

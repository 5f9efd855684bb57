"""AWQ/GPTQ parameter counts: int32 ``qweight`` tensors pack 32 / bits weights each, unpacked with
the bits of the quantization config; zero points, scales and the index are not parameters. Both
the transformers path (``model_shape``) and vLLM's (safetensors headers) are checked on tensors
built here, whose unpacked sizes are known."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from llem.backends.shape import model_shape, packed_weights_per_element
from llem.backends.vllm.shape import checkpoint_sizes
from llem.testing.tinymodel import tiny_llama

IN, OUT, VOCAB, GROUP = 64, 32, 100, 32


def _packed(method: str, bits: int) -> dict[str, torch.Tensor]:
    """The tensors of one IN x OUT linear layer as AWQ or GPTQ stores them."""
    per = 32 // bits
    if method == "awq":  # packed along the output dimension
        qweight = torch.zeros(IN, OUT // per, dtype=torch.int32)
    else:  # gptq: packed along the input dimension, with an act-order index
        qweight = torch.zeros(IN // per, OUT, dtype=torch.int32)
    tensors = {
        "qweight": qweight,
        "qzeros": torch.zeros(IN // GROUP, OUT // per, dtype=torch.int32),
        "scales": torch.zeros(IN // GROUP, OUT, dtype=torch.float16),
    }
    if method == "gptq":
        tensors["g_idx"] = torch.zeros(IN, dtype=torch.int32)
    return tensors


def _stored(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


@pytest.mark.parametrize(
    ("config", "pack"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, 8),
        ({"quant_method": "gptq", "bits": 4}, 8),
        ({"quant_method": "gptq", "bits": 8}, 4),
        ({"quant_method": "awq", "w_bit": 4}, 8),  # AutoAWQ's older key
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, None),
        (None, None),
    ],
)
def test_weights_per_packed_element_come_from_the_quantization_config(
    config: dict[str, object] | None, pack: int | None
) -> None:
    assert packed_weights_per_element(config) == pack


def test_a_transformers_quantization_config_object_is_read_too() -> None:
    from transformers import GPTQConfig

    assert packed_weights_per_element(GPTQConfig(bits=4)) == 8


@pytest.mark.parametrize(("method", "bits"), [("awq", 4), ("gptq", 4), ("gptq", 8)])
def test_checkpoint_parameters_unpack_awq_and_gptq(tmp_path: Path, method: str, bits: int) -> None:
    """A checkpoint of one quantized layer, an embedding, an LM head and a norm: parameters as
    before quantization, decode bytes as stored (packed tensors) or at the engine's dtype."""
    from safetensors.torch import save_file

    layer = _packed(method, bits)
    plain = {
        "model.embed_tokens.weight": torch.zeros(VOCAB, IN, dtype=torch.float16),
        "lm_head.weight": torch.zeros(VOCAB, IN, dtype=torch.float16),
        "model.norm.weight": torch.zeros(IN, dtype=torch.float16),
    }
    tensors = {**plain, **{f"model.layers.0.mlp.down_proj.{k}": t for k, t in layer.items()}}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    total, n_emb, decode_bytes = checkpoint_sizes(str(tmp_path), VOCAB, 2, pack=32 // bits)
    assert total == IN * OUT + 2 * VOCAB * IN + IN
    assert n_emb == VOCAB * IN
    assert decode_bytes == _stored(layer) + (VOCAB * IN + IN) * 2


class _QuantLinear(torch.nn.Module):
    """A GPTQ kernel's layer: its packed weight and metadata are buffers, not parameters."""

    def __init__(self, bits: int) -> None:
        super().__init__()
        for name, tensor in _packed("gptq", bits).items():
            self.register_buffer(name, tensor)


@pytest.mark.parametrize("bits", [4, 8])
def test_model_shape_unpacks_gptq_buffers(bits: int) -> None:
    model = tiny_llama(intermediate_size=IN, hidden_size=OUT)
    before = model_shape(model)
    dense = model.model.layers[0].mlp.down_proj  # IN -> OUT
    assert tuple(dense.weight.shape) == (OUT, IN)
    model.model.layers[0].mlp.down_proj = _QuantLinear(bits)
    model.config.quantization_config = {"quant_method": "gptq", "bits": bits}
    after = model_shape(model)
    assert after.n_parameters == before.n_parameters  # 6.7 B stays 6.7 B, not 1.1 B
    assert after.weight_bytes == (
        before.weight_bytes
        - dense.weight.numel() * dense.weight.element_size()
        + _stored(_packed("gptq", bits))
    )

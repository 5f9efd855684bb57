"""A tiny random Llama model and BPE tokenizer, built locally in seconds (no hub access).

Used by the tests and the benches wherever a real transformers model is needed. The weights are
random, so the text is gibberish, but shapes, padding, generation and loading all go through the
real code paths. The shape is a parameter: ``TINY`` (the default, head size 8) or ``HEAD64``
(head size 64, which vLLM's CPU attention needs), or any other ``LlamaConfig`` fields.

    build_tiny_model(directory)            # model + tokenizer on disk, for model.name_or_path
    build_tiny_model(directory, **HEAD64)  # the same tokenizer, a model vLLM runs on the CPU
    tiny_llama(tie_word_embeddings=True)   # in memory, no tokenizer
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

# 2 layers, hidden size 32, 4 query heads of size 8 sharing 2 key/value heads (grouped-query).
TINY: dict[str, Any] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
}
# The same depth with 2 query heads of size 64 sharing 1 key/value head.
HEAD64: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}

_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Energy per token is measured in joules; throughput in tokens per second.",
    "Explain why the sky is blue in two sentences.",
    "Write a short poem about a lighthouse keeper who counts the waves.",
    "List three uses of a paperclip that are not holding paper together.",
    "A batch of prompts is padded on the left before generation starts.",
    "Summarise the plot of a detective story set on a night train.",
    "What is the capital of France, and why did it become the capital?",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20.",
]


def tiny_llama_config(vocab_size: int = 1000, **fields: Any) -> LlamaConfig:
    """``TINY``'s LlamaConfig; ``fields`` replace or add to it (any ``LlamaConfig`` field)."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**TINY, "vocab_size": vocab_size, **fields})


def tiny_llama(vocab_size: int = 1000, seed: int = 0, **fields: Any) -> LlamaForCausalLM:
    """A random ``LlamaForCausalLM`` of ``tiny_llama_config(vocab_size, **fields)``, in memory;
    the same ``seed`` gives the same weights."""
    import torch
    from transformers import LlamaForCausalLM

    config = tiny_llama_config(vocab_size, **fields)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer of about 300 tokens with <pad>, <s>, </s> and <unk>."""
    from llem.backends.random_weights import byte_level_bpe

    tok: PreTrainedTokenizerFast = byte_level_bpe(_CORPUS * 4, 300)
    return tok


def build_tiny_model(directory: Path | str, seed: int = 0, **fields: Any) -> Path:
    """Write ``tiny_tokenizer()`` and a random Llama of ``TINY`` (with ``fields`` on top, e.g.
    ``**HEAD64``) into ``directory``, ready for ``from_pretrained``; return the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tok = tiny_tokenizer()
    tok.save_pretrained(directory)
    special = {
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
    }
    tiny_llama(len(tok), seed, **special, **fields).save_pretrained(directory)
    return directory
